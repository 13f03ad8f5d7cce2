/**
 * The errors every engine entry point raises for what the driver reports,
 * in one place: a connection that failed is `DatabaseUnavailableError`,
 * and a schema that was never migrated (or by a release without the
 * newest migrations) names `engine.migrate()` instead of a raw `42P01
 * relation "idempo.runs" does not exist`.
 */
import { DatabaseUnavailableError } from "../database-errors.js";
import { IdempoError, WorkflowUsageError } from "../errors.js";
import { inDoubt, isConnectionLoss } from "./execution/db-errors.js";

/** A missing table (42P01), statement function (42883) or schema (3F000) of idempo's own schema. */
function isMissingSchema(error: unknown, schema: string): boolean {
  const code = String((error as { code?: unknown } | null)?.code);
  return (
    (code === "42P01" || code === "42883" || code === "3F000") &&
    String((error as { message?: unknown }).message).includes(schema)
  );
}

/** The error the schema's absence is reported with; `call` names the entry point. */
function notMigrated(schema: string, call: string): WorkflowUsageError {
  return new WorkflowUsageError(
    `idempo's tables or functions are missing in schema '${schema}': run engine.migrate() (or \`idempo migrate\`) before ${call}`,
  );
}

/**
 * What an entry point raises for `error`: idempo's own errors as they are,
 * driver errors that have a typed meaning as that type, others as they are.
 */
function entryError(error: unknown, schema: string, call: string): unknown {
  if (error instanceof IdempoError) return error;
  if (isConnectionLoss(error)) return new DatabaseUnavailableError(error, inDoubt(error));
  if (isMissingSchema(error, schema)) return notMigrated(schema, call);
  return error;
}

/** `work`, its rejection passed through {@link entryError}; `call` names the entry point. */
export function translateEntryErrors<T>(work: Promise<T>, schema: string, call: string): Promise<T> {
  return work.catch((error: unknown) => {
    throw entryError(error, schema, call);
  });
}

/** Every method of `api`, its rejections passed through {@link entryError} under the method's name. */
export function withEntryErrors<T extends object>(schema: string, api: T): T {
  const guarded: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(api)) {
    guarded[name] =
      typeof method === "function"
        ? (...args: unknown[]) => translateEntryErrors(Promise.resolve(method(...args)), schema, name)
        : method;
  }
  return guarded as T;
}

/**
 * The errors of a background loop's rounds, for its `onError`: a missing
 * schema is reported once per outage, as the typed error (every round
 * fails the same way until someone migrates, and a report per round
 * buries everything else); a round that works again ends the outage.
 * Other errors are passed on as they are.
 */
export class LoopErrors {
  readonly #schema: string;
  readonly #call: string;
  readonly #onError: (error: unknown) => void;
  #down = false;

  constructor(schema: string, call: string, onError: (error: unknown) => void) {
    this.#schema = schema;
    this.#call = call;
    this.#onError = onError;
  }

  /** Report the error of a round. */
  report(error: unknown): void {
    if (isMissingSchema(error, this.#schema)) {
      if (this.#down) return;
      this.#down = true;
      this.#onError(notMigrated(this.#schema, this.#call));
      return;
    }
    this.#onError(error);
  }

  /** A round reached the database's tables: the outage, if any, is over. */
  ok(): void {
    this.#down = false;
  }
}
