// Type-checked with skipLibCheck off in the Drizzle-only consumer: @idempo/core's declarations must
// compile without Kysely installed (its Kysely types then stand for nothing; only Kysely workflows use them).
import type { DataLayer, Engine, PhaseContext, SqlSession, TxOf, WithTx } from "@idempo/core";
import { createEngine, fromDrizzle, fromKysely, fromNodePostgres, workflow } from "@idempo/core";
import { clockAccessOf, setFaultHook } from "@idempo/core/internal";

type Client = { query(config: { text: string }): Promise<{ rows: unknown[] }>; release(): void };
export const used = [createEngine, fromDrizzle, fromKysely, fromNodePostgres, workflow, clockAccessOf, setFaultHook];
export type Used = [
  DataLayer,
  Engine,
  PhaseContext<WithTx<Client>, unknown, unknown>,
  SqlSession,
  TxOf<DataLayer<Client>>,
];
