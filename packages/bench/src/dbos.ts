/**
 * DBOS Transact on the same PostgreSQL server, with its own system
 * database: a workflow of three no-op steps under a unique workflow ID (the
 * counterpart of idempo's phase / step / phase), and its replay (the same
 * workflow ID again, answered from the recorded result).
 */
import { randomUUID } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";

export interface DbosBench {
  /** Run a new three-step workflow under a fresh workflow ID. */
  newWorkflow(): Promise<string>;
  /** Call the workflow again with an ID that already completed. */
  replay(workflowId: string): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Launch DBOS once for the process (it is a singleton). `poolSize` is the
 * system database pool; DBOS creates the system database if it is missing.
 */
export async function launchDbos(systemDatabaseUrl: string, poolSize: number): Promise<DbosBench> {
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
  await DBOS.launch();
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
    shutdown: () => DBOS.shutdown(),
  };
}
