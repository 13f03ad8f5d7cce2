/**
 * The claim a run's first phase holds: when a workflow starts with a phase,
 * a new key is claimed by the first statement of that phase's transaction
 * and commits with it. Until that commit nobody else sees the record: a
 * duplicate blocks on the key's unique index (bounded by the phase's lock
 * timeout) and then reads what the commit left, or claims the key itself
 * when the phase rolled back; a crash before the commit leaves no record.
 */
import type { ClaimResult, NewRun } from "../../store/claim.js";
import { claimNewKey } from "../../store/claim.js";
import type { Executor, Tables } from "../../store/run-store.js";
import { LOST_STATEMENT } from "../../store/statement-calls.js";

/** What the claim found instead of a free key: the record to decide on, a race, or a holder still in its phase. */
export type TakenLook =
  | Exclude<ClaimResult, { readonly kind: "claimed" }>
  /** The key's first phase held it past the lock timeout: in progress, for about `retryAfterMs`. */
  | { readonly kind: "busy"; readonly retryAfterMs: number };

/** The claim an attempt makes in its first phase. */
export interface FoldedClaim {
  /** The record the claim inserts. */
  readonly run: NewRun;
  /** True until the first phase's transaction, the claim in it, has committed. */
  pending: boolean;
  /** Called once the claim statement made the key this attempt's, before the phase's code runs. */
  readonly onClaimed: () => void;
}

/**
 * Raised inside the first phase when the key was not free: the phase's
 * transaction rolls back (it wrote nothing) and the caller decides on `look`
 * as it would on an autocommit claim's answer. Not an `IdempoError`: it never
 * reaches the application.
 */
export class ClaimTaken extends Error {
  constructor(readonly look: TakenLook) {
    super("the key was not free for the first phase's claim");
  }
}

/**
 * Workflows whose first phase chose its isolation level (`SET TRANSACTION`
 * must come before any query, and the claim is the phase's first): their
 * runs claim in autocommit from then on.
 */
const claimsAlone = new WeakSet<object>();

/** True when runs of `def` may claim their key inside their first phase. */
export function mayFoldClaim(def: object): boolean {
  return !claimsAlone.has(def);
}

/** PostgreSQL's active_sql_transaction: `SET TRANSACTION ISOLATION LEVEL` after the transaction's first query. */
const ISOLATION_TOO_LATE = "25001";

/**
 * The first phase failed with `error` while it held the claim: when the
 * phase chose its isolation level, remember that `def` claims alone and ask
 * again (nothing committed); any other error is `error`.
 */
export function claimFailure(def: object, error: unknown): unknown {
  if ((error as { code?: unknown }).code !== ISOLATION_TOO_LATE) return error;
  claimsAlone.add(def);
  return new ClaimTaken({ kind: "raced" });
}

/** PostgreSQL's lock_not_available: a lock wait that ran past `lock_timeout`. */
const LOCK_NOT_AVAILABLE = "55P03";

/**
 * Claim `claim.run` as the first statement of the phase's transaction `tx`.
 *
 * Race closed: a duplicate during the first phase. Its INSERT waits on the
 * uncommitted row's unique index entry until this transaction ends; after a
 * commit it reads the committed record (replay, or 409 while more items
 * follow), after a rollback its own INSERT wins (exactly one runner).
 *
 * @throws ClaimTaken the key is held (a record, a race, or a lock wait past the phase's lock timeout).
 */
export async function claimInPhase(tx: Executor, t: Tables, claim: FoldedClaim): Promise<void> {
  let result: ClaimResult;
  try {
    result = await claimNewKey(tx, t, claim.run);
  } catch (error) {
    if ((error as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
      throw new ClaimTaken({ kind: "busy", retryAfterMs: claim.run.leaseMs });
    }
    // The session lost its prepared statements: the calls go as text from now on, and the claim is asked again.
    if (LOST_STATEMENT.includes(String((error as { code?: unknown }).code))) throw new ClaimTaken({ kind: "raced" });
    throw error;
  }
  if (result.kind !== "claimed") throw new ClaimTaken(result);
  claim.onClaimed();
}
