/**
 * The operator verbs (engine API and `idempo keys ...`): cancel, retry from
 * an item, unpark, release, forget. Each is one guarded statement in
 * `store/transitions.ts`; this layer checks the arguments, and when the
 * guard refuses, reads the record once to say why (absent, or which state).
 */
import { InputValidationError, RunNotFoundError, RunStateError } from "../../errors.js";
import { toJsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { assertValidRunKey } from "../../keys/key-validation.js";
import { CANCEL_OPTIONS, FORGET_OPTIONS, RETRY_FROM_OPTIONS } from "../../options/known-options.js";
import { checkOptions } from "../../options/option-shape.js";
import { cancelChildren, PARENT_ENDED } from "../../store/child-cancel.js";
import type { RecordRow } from "../../store/operations.js";
import { selectHistory, selectRecord } from "../../store/operations.js";
import type { Executor, Tables } from "../../store/run-store.js";
import { deleteTombstone } from "../../store/tombstones.js";
import { cancelRun, deleteRun, releaseLease, rewindRun, unparkRun } from "../../store/transitions.js";
import type { RunRecord, TombstoneRecord } from "./records.js";
import { toRecord, toTombstoneRecord } from "./records.js";

/** Options of `engine.cancel`. */
export interface CancelOptions {
  /** HTTP status of the stored answer, 100-599 (Default: 409). */
  status?: number;
  /**
   * Body of the stored answer, any JSON value (Default: a problem body
   * `{ type, title, status, code: 'run_canceled', detail }`, RFC 9457).
   */
  body?: unknown;
}

/** Options of `engine.forget`. */
export interface ForgetOptions {
  /**
   * Delete even a run whose lease is live (Default: false). Its owner's next
   * write then fails with `LeaseLostError`, and the next call with the key
   * starts over: every phase and step it had committed runs again.
   */
  force?: boolean;
}

/** Options of `engine.retryFrom`. */
export interface RetryFromOptions {
  /**
   * Give the outbox messages of the phases that run again new delivery keys
   * (Default: false). Without it a phase that runs again enqueues its
   * messages under the keys of its first run, so a receiver that
   * deduplicates on them drops the copies. With it the receiver treats them
   * as new messages and acts again (the email is sent again): use it only
   * when the first messages were lost or wrong. The new keys stay the run's
   * keys for every later attempt and `retryFrom`. Messages enqueued with
   * an explicit `deliveryKey` keep it.
   */
  resendOutbox?: boolean;
}

/** The operator verbs of an engine; each returns the record as the verb left it. */
export interface OperatorVerbs {
  /**
   * Finish a run that is in flight, parked or suspended with a stored answer
   * (outcome `canceled`, Default: 409 with problem code `run_canceled`),
   * replayed to every later call with the key. A live owner finds out at
   * its next renewal or write: its `signal` aborts and its writes fail with
   * `LeaseLostError`, so nothing it had not committed lands. Effects already
   * committed (phases, recorded steps, outbox messages) stay. The run's
   * child runs (`.child`, `.map`) and theirs that have not completed are
   * canceled too, right after (outcome `canceled`, 409 `run_canceled`).
   *
   * @returns the completed record, with its history.
   * @throws RunStateError (409) when the run is already completed.
   * @throws RunNotFoundError (404) when the key has no record.
   * @throws InputValidationError (400) for a status outside 100-599 or a body that is not JSON.
   * @throws PayloadTooLargeError (413) for a body over the engine's `maxPayloadBytes`.
   * @throws InvalidOptionError (500) for an unknown option or one of the wrong type.
   */
  cancel(tenantId: string, key: string, options?: CancelOptions): Promise<RunRecord>;
  /**
   * Move a run's recovery point back so that `itemName` and every item
   * after it run again on the next takeover, which may happen at once. Only
   * for a run no one owns: in flight with an expired lease, parked (also
   * unparked, with a fresh attempt budget) or suspended. State stays as
   * committed; the items that run again replace what they returned. A step
   * that runs again is called with the same derived key, so a provider
   * that deduplicates on it answers with its first result. A phase that
   * runs again enqueues its outbox messages under the delivery keys of its
   * first run (the relay delivers them again, and a receiver deduplicating
   * on the key drops them) unless `options.resendOutbox` asks for new keys.
   *
   * ```ts
   * await engine.retryFrom('acme', 'order-1002', 'charge')
   * await engine.retryFrom('acme', 'order-1002', 'notify', { resendOutbox: true }) // the receipt goes out again
   * ```
   *
   * @returns the updated record, with its history.
   * @throws RunStateError (409) for a live or completed run, or an item the run has not reached yet.
   * @throws RunNotFoundError (404) when the key has no record.
   * @throws InputValidationError (400) when `itemName` is not a phase or step of the run's definition.
   * @throws InvalidOptionError for an unknown option, or a `resendOutbox` that is not a boolean.
   */
  retryFrom(tenantId: string, key: string, itemName: string, options?: RetryFromOptions): Promise<RunRecord>;
  /**
   * Make a parked run takeable again at once, with a fresh attempt budget,
   * after the code or data that made it fail was fixed. The next retry (or
   * `resumeStale`) resumes it after its recovery point.
   *
   * @returns the updated record (status `in_flight`, lease expired), with its history.
   * @throws RunStateError (409) when the run is not parked.
   * @throws RunNotFoundError (404) when the key has no record.
   */
  unpark(tenantId: string, key: string): Promise<RunRecord>;
  /**
   * End an in-flight run's lease for good so that the next retry or resumer
   * takes over at once. A live owner cannot renew it back: its next renewal
   * or write fails with `LeaseLostError` and its `signal` aborts. An already
   * expired lease keeps its expiry time (how long the run has been stuck).
   *
   * @returns the updated record (no owner, lease expired), with its history.
   * @throws RunStateError (409) when the run is completed, parked or suspended.
   * @throws RunNotFoundError (404) when the key has no record.
   */
  release(tenantId: string, key: string): Promise<RunRecord>;
  /**
   * Delete a key's record and history, or its tombstone: the key is
   * forgotten and a reuse runs the workflow again from the start. Outbox
   * messages already committed stay and are still delivered. A run whose
   * lease is live is refused unless `force` is given (see {@link ForgetOptions}),
   * and so is a child run (`.child`, `.map`) whose parent has not completed.
   *
   * @returns the record as it was when deleted (`history` is `undefined`), or the tombstone.
   * @throws RunStateError (409) when the lease is live, or the run's parent waits for it, and `force` is not set.
   * @throws InvalidOptionError (500) for an unknown option or one of the wrong type.
   * @throws RunNotFoundError (404) when the key has no record, nor a tombstone in force.
   */
  forget(tenantId: string, key: string, options?: ForgetOptions): Promise<RunRecord | TombstoneRecord>;
}

function checkKey(tenantId: string, key: string): void {
  assertValidRunKey(tenantId, key);
}

/** A sentence for a lease in a refusal: who holds it and for how long. */
function liveLease(row: RecordRow): string {
  return `a live lease (owner ${row.owner_token ?? "none"}, ${Math.max(0, row.lease_remaining_ms ?? 0)} ms left)`;
}

function isLive(row: RecordRow): boolean {
  return row.status === "in_flight" && (row.lease_remaining_ms ?? 0) > 0;
}

/** The default answer a canceled run stores (RFC 9457 problem details). */
function canceledProblem(status: number): unknown {
  return {
    type: "about:blank",
    title: "Canceled",
    status,
    code: "run_canceled",
    detail: "an operator canceled this request; retrying with the same key returns this answer",
  };
}

/** The verbs on `db`; a cancel's body is bounded by `maxPayloadBytes` as every stored response is. */
export function operatorVerbs(db: Executor, tables: Tables, maxPayloadBytes: number): OperatorVerbs {
  const withHistory = async (row: RecordRow): Promise<RunRecord> =>
    toRecord(row, await selectHistory(db, tables, { tenantId: row.tenant_id, key: row.key }, row.run_id));

  /** The record as it is now, for a refusal: absent is RunNotFoundError. */
  async function current(tenantId: string, key: string): Promise<RecordRow> {
    const row = await selectRecord(db, tables, { tenantId, key });
    if (!row) throw new RunNotFoundError(tenantId, key);
    return row;
  }

  /** A child run whose parent has not completed is waited for: deleting it would leave the parent waiting for nothing. */
  async function refuseWaitedChild(tenantId: string, key: string): Promise<void> {
    const row = await selectRecord(db, tables, { tenantId, key });
    if (row?.parent_key == null) return;
    const parent = await selectRecord(db, tables, { tenantId, key: row.parent_key });
    if (!parent || parent.status === "completed") return;
    throw new RunStateError(
      tenantId,
      key,
      row.status,
      `is a child run of '${row.parent_key}' (item ${row.parent_item}), which has not completed: deleting it would ` +
        "lose its answer or leave the parent waiting for nothing; cancel it instead (the parent reads the canceled answer), or pass force",
    );
  }

  return {
    async cancel(tenantId, key, options = {}) {
      checkKey(tenantId, key);
      checkOptions("cancel", CANCEL_OPTIONS, options);
      const status = options.status ?? 409;
      if (!Number.isInteger(status) || status < 100 || status > 599) {
        throw new InputValidationError([{ path: "status", message: `must be an integer 100-599, got ${status}` }]);
      }
      const body = toJsonValue(options.body === undefined ? canceledProblem(status) : options.body);
      if (!body.ok) throw new InputValidationError(body.issues.map((i) => ({ ...i, path: `body${i.path.slice(1)}` })));
      const text = JSON.stringify(body.value);
      checkPayloadSize("the body of cancel", text, maxPayloadBytes);
      const row = await cancelRun(db, tables, { tenantId, key }, { outcome: "canceled", status, body: text });
      if (row) {
        // After the parent's commit, never under its row lock; a crash before it is repaired by the sweeper.
        await cancelChildren(db, tables, { tenantId, key, runId: row.run_id }, PARENT_ENDED);
        return withHistory(row);
      }
      const now = await current(tenantId, key);
      throw new RunStateError(
        tenantId,
        key,
        now.status,
        `is already completed (outcome ${now.outcome ?? "unknown"}): there is nothing to cancel, its stored response is replayed`,
      );
    },

    async retryFrom(tenantId, key, itemName, options = {}) {
      checkKey(tenantId, key);
      checkOptions("retryFrom", RETRY_FROM_OPTIONS, options);
      const resendOutbox = options.resendOutbox ?? false;
      const seen = await current(tenantId, key);
      const names = (JSON.parse(seen.definition) as string[]).map((e) => e.slice(e.indexOf(":") + 1));
      const at = names.indexOf(itemName);
      if (at < 0) {
        throw new InputValidationError([
          {
            path: "itemName",
            message: `'${itemName}' is not a phase or step of workflow '${seen.workflow}' (items: ${names.join(", ")})`,
          },
        ]);
      }
      const refuse = (message: string) => new RunStateError(tenantId, key, seen.status, message);
      if (seen.status === "completed") {
        throw refuse(`is completed: retryFrom needs a run that did not finish (forget the key to run it again)`);
      }
      if (isLive(seen)) {
        throw refuse(`is owned by ${liveLease(seen)}: release or cancel it first, or wait for the lease to run out`);
      }
      const reached = seen.recovery_point === null ? -1 : names.indexOf(seen.recovery_point);
      if (at > reached) {
        throw refuse(
          `'${itemName}' has not run yet (recovery point ${seen.recovery_point ?? "none"}): the next takeover runs it anyway`,
        );
      }
      const row = await rewindRun(db, tables, {
        tenantId,
        key,
        runId: seen.run_id,
        seenAttempt: seen.attempt,
        seenRecoveryPoint: seen.recovery_point,
        recoveryPoint: at === 0 ? null : (names[at - 1] ?? null),
        resendOutbox,
      });
      if (row) return withHistory(row);
      throw refuse("changed while retryFrom ran (another attempt took it over or committed): look again");
    },

    async unpark(tenantId, key) {
      checkKey(tenantId, key);
      const row = await unparkRun(db, tables, { tenantId, key });
      if (row) return withHistory(row);
      const now = await current(tenantId, key);
      throw new RunStateError(tenantId, key, now.status, `is ${now.status}, not parked: there is nothing to unpark`);
    },

    async release(tenantId, key) {
      checkKey(tenantId, key);
      const row = await releaseLease(db, tables, { tenantId, key });
      if (row) return withHistory(row);
      const now = await current(tenantId, key);
      const why =
        now.status === "completed"
          ? "is completed: only in-flight runs have a lease"
          : now.status === "suspended"
            ? "is suspended: no attempt holds a lease; it is taken once its wake-up time passes or its signal arrives (retryFrom or cancel act on it now)"
            : `is ${now.status}: no attempt holds a lease (unpark or retryFrom makes it takeable)`;
      throw new RunStateError(tenantId, key, now.status, why);
    },

    async forget(tenantId, key, options = {}) {
      checkKey(tenantId, key);
      checkOptions("forget", FORGET_OPTIONS, options);
      if (options.force !== true) await refuseWaitedChild(tenantId, key);
      const row = await deleteRun(db, tables, { tenantId, key }, options.force === true);
      if (row) return toRecord(row, undefined);
      const tombstone = await deleteTombstone(db, tables, { tenantId, key });
      if (tombstone) return toTombstoneRecord(tenantId, key, tombstone);
      const now = await current(tenantId, key);
      throw new RunStateError(
        tenantId,
        key,
        now.status,
        `has ${liveLease(now)}: deleting it would let the next call start over and repeat every phase and step it ` +
          "committed; wait for it to finish, cancel it, or pass force to delete it anyway",
      );
    },
  };
}
