/**
 * The cells of the table: one operation at one concurrency. Raw cells send
 * SQL through node-pg; engine cells call `runOnce`; every operation checks
 * its own outcome, so a cell that silently does less cannot look fast.
 */
import type { Engine } from "@idempo/core";
import { IdempotencyKeyInProgressError } from "@idempo/core";
import type pg from "pg";
import type { DbosBench } from "./dbos.js";
import type { Operation } from "./measure.js";
import type { ShapeId } from "./new-key-shapes.js";
import type { Replica } from "./replica.js";
import { asFunctionCalls, collapsed, sendReplica } from "./replica.js";
import type { PgBench } from "./setup.js";
import { BUSY_KEYS, REPLAY_KEYS } from "./setup.js";
import {
  BARE_INSERT,
  INPUT,
  newKey,
  orderOnce,
  TENANT,
  threeItems,
  threeItemsLimited,
  threeWrites,
} from "./workload.js";

export type Path =
  | "bare-insert"
  | "bare-txn"
  | "new-key"
  | "replay"
  | "conflict"
  | "three"
  | "three-writes"
  | "dbos-three"
  | "dbos-replay"
  | "dbos-three-writes"
  | "map-100"
  | "enqueue-100";

export interface Cell {
  /** Stable id, `<system>:<path>:<concurrency>`, used by the targets. */
  readonly id: string;
  readonly system:
    | "raw"
    | "raw-unnamed"
    | "raw-fn"
    | "raw-collapsed"
    | `raw-shape-${ShapeId}`
    | "idempo"
    | "idempo-named"
    | "idempo-limited"
    | "idempo-fanout"
    | "idempo-pglite"
    | "pglite-raw"
    | "pglite-fn"
    | "dbos";
  readonly path: Path;
  readonly concurrency: number;
  /** Statements per operation, BEGIN and COMMIT included (raw and idempo cells). */
  readonly statements?: number;
  readonly op: Operation;
}

const pick = (n: number) => 1 + Math.floor(Math.random() * n);
export const replayKey = (): string => `rk-${pick(REPLAY_KEYS)}`;
export const busyKey = (): string => `bk-${pick(BUSY_KEYS)}`;

function bareInsert(pool: pg.Pool): Operation {
  return async () => {
    await pool.query({ ...BARE_INSERT, values: [newKey(), TENANT, INPUT.cartId, INPUT.amountCents] });
  };
}

function bareTransaction(pool: pg.Pool): Operation {
  return async () => {
    const client = await pool.connect();
    try {
      await client.query("begin");
      await client.query({ ...BARE_INSERT, values: [newKey(), TENANT, INPUT.cartId, INPUT.amountCents] });
      await client.query("commit");
    } catch (error) {
      await client.query("rollback").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  };
}

/** The raw cells: the bare business write, and each runOnce path's own SQL. */
export function rawCells(bench: PgBench, concurrency: number, named: boolean): Cell[] {
  const pool = bench.pool(concurrency);
  const system = named ? "raw" : "raw-unnamed";
  const replica = (path: Path, r: Replica, key: () => string): Cell => ({
    id: `${system}:${path}:${concurrency}`,
    system,
    path,
    concurrency,
    statements: r.statements.length,
    op: () => sendReplica(pool, r, key(), named),
  });
  const cells: Cell[] = [
    replica("new-key", bench.replicas.newKey, newKey),
    replica("replay", bench.replicas.replay, replayKey),
    replica("conflict", bench.replicas.conflict, busyKey),
    replica("three", bench.replicas.three, newKey),
  ];
  if (!named) return cells;
  return [
    {
      id: `raw:bare-insert:${concurrency}`,
      system,
      path: "bare-insert",
      concurrency,
      statements: 1,
      op: bareInsert(pool),
    },
    {
      id: `raw:bare-txn:${concurrency}`,
      system,
      path: "bare-txn",
      concurrency,
      statements: 3,
      op: bareTransaction(pool),
    },
    ...cells,
  ];
}

/**
 * The new key's statements regrouped into fewer round trips or one commit
 * (see new-key-shapes.ts): what each change to the engine's SQL shape could
 * reach, next to the named replica of today's shape.
 */
export function shapeCells(bench: PgBench, concurrency: number): Cell[] {
  const pool = bench.pool(concurrency);
  return bench.shapes.map((shape) => ({
    id: `raw-shape-${shape.id}:new-key:${concurrency}`,
    system: `raw-shape-${shape.id}` as const,
    path: "new-key" as const,
    concurrency,
    statements: bench.replicas.newKey.statements.length,
    op: () => shape.send(pool, newKey()),
  }));
}

/**
 * The ways to send the engine's statements that could replace what it sends
 * today (unnamed statements through Kysely), at 16 clients on a plain pool:
 * each engine statement as a call of its PL/pgSQL twin (unnamed, as a plain
 * pool sends it), and single-statement transactions sent as one autocommit
 * statement (named), which only changes the paths whose phases write nothing.
 */
export function optionCells(bench: PgBench, functions: ReadonlyMap<string, string>): Cell[] {
  const pool = bench.pool(16);
  const r = bench.replicas;
  const cell = (system: "raw-fn" | "raw-collapsed", path: Path, replica: Replica, key: () => string): Cell => ({
    id: `${system}:${path}:16`,
    system,
    path,
    concurrency: 16,
    statements: replica.statements.length,
    op: () => sendReplica(pool, replica, key(), system === "raw-collapsed"),
  });
  return [
    cell("raw-fn", "new-key", asFunctionCalls(r.newKey, functions), newKey),
    cell("raw-fn", "replay", asFunctionCalls(r.replay, functions), replayKey),
    cell("raw-fn", "conflict", asFunctionCalls(r.conflict, functions), busyKey),
    cell("raw-fn", "three", asFunctionCalls(r.three, functions), newKey),
    cell("raw-collapsed", "three", collapsed(r.three), newKey),
  ];
}

/** The runOnce paths through an engine; `system` names the database it runs on. */
export function engineCells(
  engine: Engine,
  replicas: PgBench["replicas"],
  concurrency: number,
  system: "idempo" | "idempo-named" | "idempo-pglite" = "idempo",
): Cell[] {
  const newKeyOp: Operation = async () => {
    const res = await engine.runOnce(orderOnce, { tenantId: TENANT, key: newKey(), input: INPUT });
    if (res.status !== 201 || res.replayed) throw new Error(`new key answered ${res.status}`);
  };
  const cell = (path: Path, r: Replica, op: Operation): Cell => ({
    id: `${system}:${path}:${concurrency}`,
    system,
    path,
    concurrency,
    statements: r.statements.length,
    op,
  });
  return [
    cell("new-key", replicas.newKey, newKeyOp),
    cell("replay", replicas.replay, async () => {
      const res = await engine.runOnce(orderOnce, { tenantId: "replay", key: replayKey(), input: INPUT });
      if (!res.replayed) throw new Error("replay ran the workflow again");
    }),
    cell("conflict", replicas.conflict, async () => {
      try {
        await engine.runOnce(orderOnce, { tenantId: "busy", key: busyKey(), input: INPUT });
      } catch (error) {
        if (error instanceof IdempotencyKeyInProgressError) return;
        throw error;
      }
      throw new Error("a key under a valid lease was not refused");
    }),
    cell("three", replicas.three, async () => {
      const res = await engine.runOnce(threeItems, { tenantId: TENANT, key: newKey(), input: INPUT });
      if (res.status !== 201) throw new Error(`phase/step/phase answered ${res.status}`);
    }),
  ];
}

/**
 * Phase / step / phase of a workflow with `.concurrency` (more slots than
 * clients: nobody waits), next to `idempo:three` of the same workflow
 * without it: the limit's own cost, one statement more per run.
 */
export function limitedCells(engine: Engine, replicas: PgBench["replicas"], concurrency: number): Cell[] {
  return [
    {
      id: `idempo-limited:three:${concurrency}`,
      system: "idempo-limited",
      path: "three",
      concurrency,
      statements: replicas.three.statements.length + 1,
      op: async () => {
        const res = await engine.runOnce(threeItemsLimited, { tenantId: TENANT, key: newKey(), input: INPUT });
        if (res.status !== 201) throw new Error(`limited phase/step/phase answered ${res.status}`);
      },
    },
  ];
}

/**
 * Phase / step / phase with a business INSERT in each phase, on a new key:
 * the equal-work counterpart of DBOS's transaction / step / transaction.
 */
export function equalWorkCell(engine: Engine, statements: number, concurrency: number): Cell {
  return {
    id: `idempo:three-writes:${concurrency}`,
    system: "idempo",
    path: "three-writes",
    concurrency,
    statements,
    op: async () => {
      const res = await engine.runOnce(threeWrites, { tenantId: TENANT, key: newKey(), input: INPUT });
      if (res.status !== 201) throw new Error(`phase/step/phase with writes answered ${res.status}`);
    },
  };
}

/**
 * DBOS: new three-step workflows, replays of `completed` workflow IDs, and
 * new transaction / step / transaction workflows with two business INSERTs.
 */
export function dbosCells(dbos: DbosBench, completed: readonly string[], concurrency: number): Cell[] {
  return [
    {
      id: `dbos:dbos-three:${concurrency}`,
      system: "dbos",
      path: "dbos-three",
      concurrency,
      op: () => dbos.newWorkflow().then(() => undefined),
    },
    {
      id: `dbos:dbos-replay:${concurrency}`,
      system: "dbos",
      path: "dbos-replay",
      concurrency,
      op: () => dbos.replay(completed[Math.floor(Math.random() * completed.length)] as string),
    },
    {
      id: `dbos:dbos-three-writes:${concurrency}`,
      system: "dbos",
      path: "dbos-three-writes",
      concurrency,
      op: () => dbos.newWorkflowWithWrites(),
    },
  ];
}
