/** `engine.signal`: check a durable signal, keep it for its run and wake the run when it waits for it. */
import { InputValidationError, InvalidOptionError, RunNotFoundError } from "../../errors.js";
import { canonicalJson, fingerprintOf } from "../../json/fingerprint.js";
import { toJsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { assertValidKey, assertValidRunKey } from "../../keys/key-validation.js";
import { SIGNAL_OPTIONS } from "../../options/known-options.js";
import { checkOptions, describeValue } from "../../options/option-shape.js";
import type { Executor } from "../../store/run-store.js";
import type { SignalDelivery } from "../../store/signals.js";
import { deliverSignal, discardSignal, lockRunForSignal, TIMED_OUT } from "../../store/signals.js";
import { selectTombstone } from "../../store/tombstones.js";
import type { EngineContext } from "../engine-context.js";
import { engineTransaction, inSession } from "../engine-db.js";
import type { SignalResult } from "./signal-acceptance.js";
import {
  acceptance,
  checkPayload,
  checkWaitsFor,
  EXPIRED_SIGNAL,
  ownWait,
  unusableStoredSignal,
} from "./signal-acceptance.js";

/** The type of `SignalOptions.tx`: any object (the data layer checks it); `DB` names the Kysely database type for the reader. */
type TxOption<DB> = DB extends unknown ? object : object;

/** Options of `engine.signal`. */
export interface SignalOptions<DB = unknown> {
  /**
   * The caller's transaction, of the engine's data layer (a Kysely
   * transaction, a Drizzle transaction, a node-postgres client inside
   * `BEGIN`): the signal is written in it and exists exactly when it
   * commits (a rollback leaves no signal and no wake-up; workers are
   * notified on its commit). The run's row stays locked until it ends.
   * Without it, `signal` runs its own transaction on the engine's database
   * (Default: none). `DB` is the Kysely database type, for the reader.
   */
  readonly tx?: TxOption<DB>;
}

/**
 * The caller's transaction, without its plugins (the engine's statements
 * name their columns as stored), or undefined for a transaction of our own.
 *
 * @throws InvalidOptionError for an unknown option or a `tx` that is not a transaction.
 */
function callerTransaction(ctx: EngineContext, options: SignalOptions<unknown> | undefined): Executor | undefined {
  checkOptions("signal", SIGNAL_OPTIONS, options);
  const tx = options?.tx;
  if (tx === undefined) return undefined;
  const session = ctx.layer.sessionOf(tx);
  if (session === undefined) {
    throw new InvalidOptionError(
      "tx",
      `signal: tx must be a transaction of the engine's data layer, got ${describeValue(tx)}`,
    );
  }
  return inSession(session);
}

/** Deliver a durable signal to a run's `.waitFor(name)`; see `Engine.signal`. */
export async function signalRun(
  ctx: EngineContext,
  tenantId: string,
  key: string,
  name: string,
  payload: unknown,
  options?: SignalOptions<unknown>,
): Promise<SignalResult> {
  assertValidRunKey(tenantId, key);
  assertValidKey(name, "signal name");
  const converted = toJsonValue(payload);
  if (!converted.ok) {
    throw new InputValidationError(converted.issues.map((i) => ({ ...i, path: `payload${i.path.slice(1)}` })));
  }
  const caller = callerTransaction(ctx, options);
  const json = converted.value;
  const canonical = canonicalJson(json);
  checkPayloadSize(`the payload of signal '${name}'`, canonical, ctx.maxPayloadBytes);
  const fingerprint = fingerprintOf(`signal:${name}`, canonical);
  const deliver = async (tx: Executor): Promise<SignalResult> => {
    const run = await lockRunForSignal(tx, ctx.tables, tenantId, key);
    // An expired run's tombstone acknowledges any signal, swept or not: the run ended, nothing can change.
    const tombstoned = run ? run.tombstoned : (await selectTombstone(tx, ctx.tables, { tenantId, key })) !== null;
    if (tombstoned) return EXPIRED_SIGNAL;
    if (!run || run.expired) throw new RunNotFoundError(tenantId, key);
    checkWaitsFor(run, name);
    const wait = ownWait(ctx.workflows, run, name);
    if (wait.known) await checkPayload(wait.item, json);
    const delivery: SignalDelivery = {
      tenantId,
      key,
      runId: run.runId,
      name,
      payload: JSON.stringify(json),
      fingerprint,
      // Nothing is stored that the run might not be able to use.
      mayStore: wait.known && run.status !== "completed",
    };
    let done = await deliverSignal(tx, ctx.tables, delivery);
    const other = done.existing !== null && done.existing !== TIMED_OUT && done.existing !== fingerprint;
    if (other && delivery.mayStore && wait.known) {
      // The one stored may have been stored unchecked: one the run cannot use gives way to this one.
      const reason = await unusableStoredSignal(wait.item, done);
      if (reason !== null) {
        const unusable = { tenantId, key, runId: run.runId, name, fingerprint: done.existing ?? "" };
        await discardSignal(tx, ctx.tables, { ...unusable, attempt: run.attempt, reason });
        done = await deliverSignal(tx, ctx.tables, delivery);
      }
    }
    return acceptance({ ...run, tenantId, key }, name, fingerprint, done, wait);
  };
  return caller ? deliver(caller) : engineTransaction(ctx.layer, deliver);
}
