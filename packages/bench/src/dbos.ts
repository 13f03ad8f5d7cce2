/**
 * DBOS Transact on the same PostgreSQL server, with its own system
 * database: a workflow of three no-op steps under a unique workflow ID (the
 * counterpart of idempo's phase / step / phase with no business work), its
 * replay (the same workflow ID again, answered from the recorded result),
 * and transaction / step / transaction doing the same two business INSERTs
 * as idempo's equal-work workflow, through a DBOS data source on the bench's
 * scratch database (see dbos-source.ts).
 */
import { randomUUID } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { Kysely, PostgresDialect, sql } from "kysely";
import { registerKyselySource } from "./dbos-source.js";
import { openPool } from "./setup.js";
import { insertOrder, secondOrderId, TENANT } from "./workload.js";

export interface DbosBench {
  /** Run a new three-step workflow under a fresh workflow ID. */
  newWorkflow(): Promise<string>;
  /** Call the workflow again with an ID that already completed. */
  replay(workflowId: string): Promise<void>;
  /** Run a new transaction / step / transaction workflow (two order rows) under a fresh workflow ID. */
  newWorkflowWithWrites(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Launch DBOS once for the process (it is a singleton). `poolSize` is the
 * system database pool and the data source's pool on `appDatabaseUrl`;
 * DBOS creates the system database if it is missing. One workflow with
 * writes is run and checked before this returns: both order rows written,
 * no checkpoint of its transactions left behind.
 */
export async function launchDbos(
  systemDatabaseUrl: string,
  appDatabaseUrl: string,
  poolSize: number,
): Promise<DbosBench> {
  DBOS.setConfig({
    name: "idempo-bench",
    systemDatabaseUrl,
    systemDatabasePoolSize: poolSize,
    logLevel: "error",
  });
  const threeSteps = DBOS.registerWorkflow(
    async () => {
      const a = await DBOS.runStep(async () => ({ reserved: true }), { name: "reserve" });
      const b = await DBOS.runStep(async () => ({ chargeId: "ch_1" }), { name: "charge" });
      const c = await DBOS.runStep(async () => ({ confirmed: true }), { name: "confirm" });
      return { ...a, ...b, ...c };
    },
    { name: "bench_three" },
  );
  const source = registerKyselySource(
    "bench-app",
    new Kysely<unknown>({ dialect: new PostgresDialect({ pool: openPool(appDatabaseUrl, poolSize) }) }),
  );
  const threeWrites = DBOS.registerWorkflow(
    async () => {
      const id = DBOS.workflowID as string;
      const a = await source.run("reserve", async () => {
        await insertOrder(source.client, id, TENANT);
        return { reserved: true };
      });
      const b = await DBOS.runStep(async () => ({ chargeId: "ch_1" }), { name: "charge" });
      const c = await source.run("confirm", async () => {
        await insertOrder(source.client, secondOrderId(id), TENANT);
        return { confirmed: true };
      });
      return { ...a, ...b, ...c };
    },
    { name: "bench_three_writes" },
  );
  await DBOS.launch();
  const withWrites = async (id: string) => {
    const result = await DBOS.withNextWorkflowID(id, () => threeWrites());
    if (result.confirmed !== true) throw new Error("DBOS workflow with writes returned an unexpected result");
  };
  const checkId = randomUUID();
  await withWrites(checkId);
  const { rows } = await sql<{ orders: number; checkpoints: number }>`
    SELECT (SELECT count(*)::int FROM orders WHERE id IN (${checkId}, ${secondOrderId(checkId)})) AS orders,
           (SELECT count(*)::int FROM dbos.transaction_completion WHERE workflow_id = ${checkId}) AS checkpoints`.execute(
    source.db,
  );
  if (rows[0]?.orders !== 2 || rows[0]?.checkpoints !== 0) {
    throw new Error(`DBOS workflow with writes left ${JSON.stringify(rows[0])}, not 2 orders and 0 checkpoints`);
  }
  return {
    async newWorkflow() {
      const id = randomUUID();
      const result = await DBOS.withNextWorkflowID(id, () => threeSteps());
      if (result.confirmed !== true) throw new Error("DBOS workflow returned an unexpected result");
      return id;
    },
    async replay(workflowId) {
      const result = await DBOS.withNextWorkflowID(workflowId, () => threeSteps());
      if (result.confirmed !== true) throw new Error("DBOS replay returned an unexpected result");
    },
    newWorkflowWithWrites: () => withWrites(randomUUID()),
    shutdown: () => DBOS.shutdown(),
  };
}
