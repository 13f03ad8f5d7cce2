/**
 * A DBOS transactional data source on Kysely over node-postgres, so that a
 * DBOS workflow can do its business writes the way DBOS users do them: in
 * DBOS transactions, each of which commits the writes and DBOS's checkpoint
 * of the transaction together.
 *
 * DBOS ships such data sources as separate packages; none that works with
 * dbos-sdk 5.3.0 could be installed from the registry (it offers no
 * node-postgres or Kysely one, and the knex 4.5.13, drizzle 4.27.6 and
 * postgres 4.24.16 data sources call `checkSchemaInstallationPG`, which
 * 5.3.0 no longer exports). So the bench
 * implements the SDK's data-source contract (`@dbos-inc/dbos-sdk/datasource`)
 * itself, with the statements DBOS's own Kysely data source sends for one
 * transaction of a workflow:
 *
 * 1. the transaction's checkpoint is read (`SELECT ... FROM
 *    dbos.transaction_completion`), outside the transaction;
 * 2. `BEGIN`; the function's own statements; the checkpoint `INSERT ... ON
 *    CONFLICT DO NOTHING RETURNING`; the ownership check of the SDK
 *    (`assertStillOwnsWorkflow`, one read of the system database); `COMMIT`;
 *
 * and, when the workflow completes, the SDK has the data source delete the
 * workflow's checkpoints in a transaction of its own, committed only while
 * the workflow is still owned. Around each transaction the SDK itself reads
 * and writes the step's record in its system database, as for any step.
 *
 * Not a general-purpose data source: a failed transaction's error is not
 * recorded (the bench's never fail), and serialization failures are not
 * retried (the bench runs at READ COMMITTED).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type { DataSourceTransactionHandler } from "@dbos-inc/dbos-sdk/datasource";
import {
  assertStillOwnsWorkflow,
  DBOSStepAlreadyRecordedError,
  migrateDataSourcePG,
  registerDataSource,
  replayRecordedStep,
  runTransaction,
} from "@dbos-inc/dbos-sdk/datasource";
import type { Kysely, Transaction } from "kysely";
import { sql } from "kysely";
import { SuperJSON } from "superjson";

interface Checkpoint {
  readonly output: string | null;
  readonly error: string | null;
}

/** The schema DBOS's data sources keep their checkpoints in (their default). */
const SCHEMA = "dbos";

class KyselyTransactions implements DataSourceTransactionHandler {
  readonly #current = new AsyncLocalStorage<Transaction<unknown>>();

  constructor(
    readonly name: string,
    readonly db: Kysely<unknown>,
  ) {}

  async initialize(): Promise<void> {
    await this.db
      .transaction()
      .execute((trx) =>
        migrateDataSourcePG(async (text) => (await sql.raw<Record<string, unknown>>(text).execute(trx)).rows, SCHEMA),
      );
  }

  async destroy(): Promise<void> {
    await this.db.destroy();
  }

  async deleteCheckpoints(workflowId: string, startStep: number, beforeCommit?: () => Promise<void>): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await sql`DELETE FROM dbos.transaction_completion
                WHERE workflow_id = ${workflowId} AND function_num >= ${startStep}`.execute(trx);
      await beforeCommit?.();
    });
  }

  /** The transaction of the DBOS transaction function running now. */
  get client(): Transaction<unknown> {
    const trx = this.#current.getStore();
    if (!trx) throw new Error(`data source ${this.name}: client read outside a DBOS transaction`);
    return trx;
  }

  async #recorded(workflowId: string, stepId: number): Promise<Checkpoint | undefined> {
    const { rows } = await sql<Checkpoint>`SELECT output, error FROM dbos.transaction_completion
                                           WHERE workflow_id = ${workflowId} AND function_num = ${stepId}`.execute(
      this.db,
    );
    return rows[0];
  }

  async invokeTransactionFunction<This, Args extends unknown[], Return>(
    _config: unknown,
    target: This,
    func: (this: This, ...args: Args) => Promise<Return>,
    ...args: Args
  ): Promise<Return> {
    const workflowId = DBOS.workflowID;
    const stepId = DBOS.stepID;
    const run = (trx: Transaction<unknown>) => this.#current.run(trx, () => func.apply(target, args));
    // Outside a workflow there is nothing to checkpoint.
    if (workflowId === undefined || stepId === undefined) return this.db.transaction().execute(run);
    const earlier = await this.#recorded(workflowId, stepId);
    if (earlier) return replayRecordedStep<Return>(earlier);
    try {
      return await this.db.transaction().execute(async (trx) => {
        const result = await run(trx);
        const { rows } = await sql`INSERT INTO dbos.transaction_completion (workflow_id, function_num, output)
                                   VALUES (${workflowId}, ${stepId}, ${SuperJSON.stringify(result)})
                                   ON CONFLICT (workflow_id, function_num) DO NOTHING
                                   RETURNING workflow_id`.execute(trx);
        if (rows.length === 0) throw new DBOSStepAlreadyRecordedError(workflowId, stepId);
        // Holding the checkpoint row, so a later owner's INSERT waits for this commit.
        await assertStillOwnsWorkflow(workflowId);
        return result;
      });
    } catch (error) {
      if (!(error instanceof DBOSStepAlreadyRecordedError)) throw error;
      // A concurrent execution recorded the transaction first: its outcome is the one.
      const recorded = await this.#recorded(workflowId, stepId);
      if (!recorded) throw new Error(`workflow ${workflowId} step ${stepId}: conflicting checkpoint vanished`);
      return replayRecordedStep<Return>(recorded);
    }
  }
}

export interface DbosKyselySource {
  /** The data source's own Kysely (for checks outside DBOS transactions). */
  readonly db: Kysely<unknown>;
  /** Run `fn` as a DBOS transaction named `name`; `fn` reaches its transaction as `client`. */
  run<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** The transaction of the DBOS transaction function running now. */
  readonly client: Transaction<unknown>;
}

/**
 * Register a data source named `name` on `db` with DBOS; call it before
 * `DBOS.launch()`, which creates its checkpoint table, and which ends `db`
 * at `DBOS.shutdown()`.
 */
export function registerKyselySource(name: string, db: Kysely<unknown>): DbosKyselySource {
  const handler = new KyselyTransactions(name, db);
  registerDataSource(handler);
  return {
    db,
    run: (txName, fn) => runTransaction(fn, txName, { dsName: name }),
    get client() {
      return handler.client;
    },
  };
}
