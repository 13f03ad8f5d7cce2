/**
 * Where a statement of the store runs: the engine's data layer in
 * autocommit (any connection) or one transaction. The runtime makes these
 * from the data layer it was given (`database/data-layer.ts`); the store
 * knows nothing of Kysely, Drizzle or node-postgres.
 */
export interface Executor {
  /**
   * Run `text` (placeholders `$1` to `$n` for `values`) and return its rows.
   * `name` names a fixed statement the driver may prepare once per
   * connection; `last` marks the last statement of a transaction (see
   * `SqlSession.query` in `database/data-layer.ts`).
   */
  query<R>(text: string, values: readonly unknown[], name?: string, last?: boolean): Promise<R[]>;
  /** True inside a transaction: a failed statement has aborted it, so nothing is sent again on it. */
  readonly isTransaction: boolean;
}

/** Runs `body` in one transaction of the engine's own (a migration, the overview's snapshot). */
export type InTransaction = <T>(body: (tx: Executor) => Promise<T>) => Promise<T>;
