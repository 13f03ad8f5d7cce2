/**
 * The durable scenario's signal senders: the provider's confirmation,
 * delivered several times from racing connections (and once with a forged
 * payload, which must be refused), and the signals a run cannot use (a
 * payload that fails the wait's schema, or one sent by a process that
 * knows only another version of the workflow), each of which must be
 * refused or, for the other-version process after the real confirmation
 * is in, answered as a repeat of it. A resolved new delivery of an
 * unusable signal is acknowledged-but-unusable.
 */
import type { Engine } from "@idempo/core";
import { IdempotencyKeyMismatchError, InputValidationError, RunStateError } from "@idempo/core";
import type { Random } from "../random.ts";
import type { Findings, Intent } from "./durable-context.ts";
import { sleep } from "./durable-context.ts";

/** What the senders saw, per kind of answer. */
interface SignalTally {
  sent: number;
  duplicates: number;
  woke: number;
  conflictsRefused: number;
  unusableRefused: number;
  acknowledgedUnusable: number;
  /** Deliveries answered as new (`duplicate: false`), by key. */
  readonly accepted: Map<string, number>;
}

/** The senders, over the signalling engines and the one that knows only the other version. */
export function signalSenders(deps: {
  readonly engines: readonly Engine[];
  readonly foreign: Engine;
  readonly rnd: Random;
  readonly maxSleepMs: number;
  readonly findings: Findings;
}) {
  const { engines, foreign, rnd, findings } = deps;
  const tally: SignalTally = {
    sent: 0,
    duplicates: 0,
    woke: 0,
    conflictsRefused: 0,
    unusableRefused: 0,
    acknowledgedUnusable: 0,
    accepted: new Map(),
  };
  const anyEngine = () => engines[rnd.below(engines.length)] as Engine;

  /** Deliver `payload` as the confirmation; `conflict` says it is forged and must be refused. */
  const deliver = async (it: Intent, payload: unknown, conflict: boolean) => {
    tally.sent++;
    try {
      const res = await anyEngine().signal(it.tenantId, it.key, "confirmed", payload);
      if (conflict) findings.violation(`${it.tenantId}/${it.key}: a conflicting confirmation was accepted`);
      else if (res.duplicate) tally.duplicates++;
      else tally.accepted.set(it.key, (tally.accepted.get(it.key) ?? 0) + 1);
      if (res.woke) tally.woke++;
    } catch (error) {
      if (conflict && error instanceof IdempotencyKeyMismatchError) tally.conflictsRefused++;
      else findings.violation(`${it.tenantId}/${it.key}: signal raised ${String(error)}`);
    }
  };

  /** At a random moment, a signal the run cannot use: an invalid payload, or the real one from the other version. */
  const sendUnusable = async (it: Intent, fromOtherVersion: boolean) => {
    await sleep(rnd.between(0, deps.maxSleepMs * 2));
    tally.sent++;
    const via = fromOtherVersion ? foreign : anyEngine();
    const payload = fromOtherVersion ? it.payload : { intent: it.payload.intent, nonce: 7 };
    try {
      const res = await via.signal(it.tenantId, it.key, "confirmed", payload);
      if (fromOtherVersion && res.duplicate) tally.duplicates++;
      else {
        tally.acknowledgedUnusable++;
        findings.note(
          `${it.tenantId}/${it.key}: an ${fromOtherVersion ? "other-version" : "invalid"} signal was acknowledged`,
        );
      }
    } catch (error) {
      const refused =
        error instanceof RunStateError ||
        (!fromOtherVersion && (error instanceof InputValidationError || error instanceof IdempotencyKeyMismatchError));
      if (refused) tally.unusableRefused++;
      else findings.violation(`${it.tenantId}/${it.key}: an unusable signal raised ${String(error)}`);
    }
  };

  return { tally, deliver, sendUnusable };
}
