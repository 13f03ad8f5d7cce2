/**
 * The PGlite side of the bench: the engine on in-process PGlite against the
 * very statements it sends there, recorded on PGlite and issued straight to
 * it (`db.query`, which is what the dialect calls), and against the same
 * statements as PL/pgSQL functions. PGlite has one connection and serialises
 * its callers, so its cells run at one client (16 clients get what one gets).
 */
import { PGlite } from "@electric-sql/pglite";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import type { Cell, Path } from "./cells.js";
import { busyKey, engineCells, replayKey } from "./cells.js";
import { createStatementFunctions } from "./plpgsql.js";
import type { Replica } from "./replica.js";
import { asFunctionCalls, bindReplica, replicate, StatementRecorder } from "./replica.js";
import type { PgBench } from "./setup.js";
import { BUSY_KEYS, REPLAY_KEYS, recordSeededPaths } from "./setup.js";
import { HELD_IN_FLIGHT, INPUT, newKey, ORDERS_DDL, orderOnce, seedCopies, TENANT } from "./workload.js";

export interface PgliteBench {
  readonly db: Kysely<unknown>;
  readonly cells: Cell[];
}

/**
 * Send a replica straight to PGlite with `db.query`, BEGIN and COMMIT
 * included, as the dialect does (PGlite's own `transaction()` helper costs
 * more per call and would flatter the engine). One client: no interleaving.
 */
async function sendToPglite(db: PGlite, replica: Replica, key: string): Promise<void> {
  let open = false;
  try {
    for (const st of bindReplica(replica, key)) {
      if (st.kind === "begin") open = true;
      if (st.kind === "commit") open = false;
      // Text and values as recorded: what the dialect hands PGlite for the engine's statement.
      await db.query(st.text, st.values);
    }
  } catch (error) {
    if (open) await db.query("rollback").catch(() => undefined);
    throw error;
  }
}

/**
 * Record one engine run per path on PGlite, through an engine of its own
 * whose Kysely logs (the measured engine does not), after one unrecorded run
 * in which it learns how PGlite takes a phase's begin.
 */
async function recordReplicas(pglite: PGlite): Promise<PgBench["replicas"]> {
  // Never destroyed: destroying a PGlite dialect's Kysely closes the PGlite it was given.
  const recorder = new StatementRecorder(new PGliteDialect(pglite));
  const engine: Engine = createEngine({ db: recorder.db });
  await engine.runOnce(orderOnce, { tenantId: TENANT, key: "record-warm-up", input: INPUT });
  const newKeyRun = await recorder.record(() =>
    engine.runOnce(orderOnce, { tenantId: TENANT, key: "record-order", input: INPUT }),
  );
  const { replayRun, conflictRun, threeRun } = await recordSeededPaths(recorder, engine, "record-three");
  return {
    newKey: replicate("new key (PGlite)", newKeyRun, "record-order"),
    replay: replicate("replay (PGlite)", replayRun, "rk-1"),
    conflict: replicate("conflict (PGlite)", conflictRun, "bk-1"),
    three: replicate("phase/step/phase (PGlite)", threeRun, "record-three"),
  };
}

/** Send each write replica once and check that it completed its key, as on PostgreSQL. */
async function checkReplicas(pglite: PGlite, replicas: PgBench["replicas"]): Promise<void> {
  for (const [replica, key] of [
    [replicas.newKey, "check-new"],
    [replicas.three, "check-three"],
  ] as const) {
    await sendToPglite(pglite, replica, key);
    const { rows } = await pglite.query<{ status: string }>(
      "SELECT status FROM idempo.runs WHERE tenant_id = $1 AND key = $2",
      [TENANT, key],
    );
    if (rows[0]?.status !== "completed") {
      throw new Error(`replica '${replica.label}' left key ${key} ${rows[0]?.status ?? "absent"}, not completed`);
    }
  }
}

export async function preparePglite(): Promise<PgliteBench> {
  const pglite = await PGlite.create();
  const db = new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
  const engine = createEngine({ db });
  await engine.migrate();
  await sql.raw(ORDERS_DDL).execute(db);
  // The same seeded keys as on PostgreSQL, copied from one real record (whose phase also lets the
  // measured engine learn how PGlite takes a phase's begin before any cell runs).
  await engine.runOnce(orderOnce, { tenantId: TENANT, key: "seed-order", input: INPUT });
  const from = { fromTenant: TENANT, fromKey: "seed-order" };
  // With their history: PGlite has no autovacuum, so the statistics of VACUUM ANALYZE below are the
  // ones the statement functions plan with for the whole run. Planned on a near-empty run_history,
  // their history statements scan it, and a phase/step/phase costs more with every run before it.
  await seedCopies(pglite, { ...from, toTenant: "replay", prefix: "rk-", count: REPLAY_KEYS, withHistory: true });
  await seedCopies(pglite, {
    ...from,
    toTenant: "busy",
    prefix: "bk-",
    count: BUSY_KEYS,
    set: HELD_IN_FLIGHT,
  });
  const r = await recordReplicas(pglite);
  await checkReplicas(pglite, r);
  await pglite.query("VACUUM ANALYZE");
  const functions = await createStatementFunctions(pglite, [r.newKey, r.replay, r.conflict, r.three]);

  const raw = (system: "pglite-raw" | "pglite-fn", path: Path, replica: Replica, key: () => string): Cell => {
    const sent = system === "pglite-fn" ? asFunctionCalls(replica, functions) : replica;
    return {
      id: `${system}:${path}:1`,
      system,
      path,
      concurrency: 1,
      statements: sent.statements.length,
      op: () => sendToPglite(pglite, sent, key()),
    };
  };
  const cells: Cell[] = [
    ...engineCells(engine, r, 1, "idempo-pglite"),
    ...(["pglite-raw", "pglite-fn"] as const).flatMap((system) => [
      raw(system, "new-key", r.newKey, newKey),
      raw(system, "replay", r.replay, replayKey),
      raw(system, "conflict", r.conflict, busyKey),
      raw(system, "three", r.three, newKey),
    ]),
  ];
  return { db, cells };
}
