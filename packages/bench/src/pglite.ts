/**
 * The PGlite side of the bench: the engine on in-process PGlite against the
 * very statements it sends, issued straight to PGlite (`db.query`, which is
 * what the dialect calls), and against the same statements as PL/pgSQL
 * functions. PGlite has one connection and serialises its callers, so its
 * cells run at one client (16 clients get what one gets).
 */
import { PGlite } from "@electric-sql/pglite";
import { createEngine } from "@idempo/core";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import type { Cell, Path } from "./cells.js";
import { busyKey, engineCells, replayKey } from "./cells.js";
import { createStatementFunctions } from "./plpgsql.js";
import type { Replica } from "./replica.js";
import { asFunctionCalls, bindReplica } from "./replica.js";
import type { PgBench } from "./setup.js";
import { BUSY_KEYS, REPLAY_KEYS } from "./setup.js";
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
      if (st.kind === "begin") {
        open = true;
        // PGlite takes one command per query: a phase's `BEGIN; SET LOCAL ...` goes as two, as the engine sends it there.
        for (const part of st.text.split(/;\s*/)) await db.query(part);
        continue;
      }
      if (st.kind === "commit") open = false;
      await db.query(st.kind === "query" ? st.text : st.kind, st.kind === "query" ? st.values : undefined);
    }
  } catch (error) {
    if (open) await db.query("rollback").catch(() => undefined);
    throw error;
  }
}

export async function preparePglite(bench: PgBench): Promise<PgliteBench> {
  const pglite = await PGlite.create();
  const db = new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
  const engine = createEngine({ db });
  await engine.migrate();
  await sql.raw(ORDERS_DDL).execute(db);
  // The same seeded keys as on PostgreSQL, copied from one real record.
  await engine.runOnce(orderOnce, { tenantId: TENANT, key: "seed-order", input: INPUT });
  const from = { fromTenant: TENANT, fromKey: "seed-order" };
  await seedCopies(pglite, { ...from, toTenant: "replay", prefix: "rk-", count: REPLAY_KEYS });
  await seedCopies(pglite, {
    ...from,
    toTenant: "busy",
    prefix: "bk-",
    count: BUSY_KEYS,
    set: HELD_IN_FLIGHT,
  });
  await pglite.query("VACUUM ANALYZE");
  const r = bench.replicas;
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
