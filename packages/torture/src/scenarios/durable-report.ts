/** The durable scenario's options, its report, its verdict and its one line. */

/** How big a durable run is; every number bounds work, none is a duration budget. */
export interface DurableOptions {
  /** Maintenance URL of the server; the scenario makes (and drops) its own database there. */
  readonly serverUrl: string;
  /** Intents enqueued (each one run). */
  readonly intents: number;
  /** Worker processes running `startWorker` and an outbox relay at any time. */
  readonly workers: number;
  /** SIGKILLs of one worker process (each replaced at once by a fresh one). */
  readonly kills: number;
  /**
   * Halfway through the single kills, SIGKILL every worker at once and only
   * then start new ones: for a moment no process holds or knows any run.
   */
  readonly killAllOnce: boolean;
  /** Deliveries of each intent's confirmation (the same payload, from racing connections). */
  readonly deliveries: number;
  /** Intents that also get a confirmation with another payload: it must be refused. */
  readonly conflicts: number;
  /** Intents that also get a confirmation whose payload fails the wait's schema: it must be refused. */
  readonly invalidSignals: number;
  /**
   * Intents that also get their confirmation from a process that knows only
   * another version of the workflow: refused with nothing stored (or, after
   * the real one is in, answered as a repeat of it).
   */
  readonly foreignSignals: number;
  /**
   * Intents an operator rewinds with `retryFrom("notify")` while they wait
   * for their confirmation (held back until then), so the phase that
   * enqueued their message runs again; every second one with
   * `resendOutbox: true`, which must give its message one new delivery key.
   */
  readonly retries: number;
  /**
   * Intents of a workflow with a one-second retention, run to completion
   * after the chaos; their keys are retried and their signals repeated
   * until the sweeper has turned their records into tombstones, and after.
   */
  readonly retained: number;
  /** Enqueues in transactions that roll back: those runs must never exist. */
  readonly rolledBack: number;
  /** Lease of every run, in ms; short, so a killed worker's run is taken over soon. */
  readonly leaseMs: number;
  /** Longest sleep of a run, in ms (each sleeps a random time up to it). */
  readonly maxSleepMs: number;
  readonly seed: number;
  readonly log: (line: string) => void;
}

/** What the durable scenario found. */
export interface DurableReport {
  readonly intents: number;
  /** Worker processes SIGKILLed (and replaced), the ones killed all at once included. */
  readonly kills: number;
  /** `engine.signal` calls made during the chaos, duplicates and conflicts included. */
  readonly signalsSent: number;
  /** Deliveries answered `duplicate: true` (the same signal again). */
  readonly duplicateSignals: number;
  /** Deliveries that found the run suspended on the wait and woke it. */
  readonly wokeByDelivery: number;
  /** Conflicting payloads refused with IdempotencyKeyMismatchError (must equal `conflicts`). */
  readonly conflictsRefused: number;
  /** Invalid-payload and other-version signals refused (the other-version repeats of a delivered confirmation count as duplicates instead). */
  readonly unusableRefused: number;
  /**
   * Signals whose call resolved as a new delivery but that the run never
   * used: an invalid or other-version signal acknowledged, an accepted
   * confirmation whose payload is not what the run merged, or a repeated
   * signal for a retained run accepted as new. Must be 0.
   */
  readonly acknowledgedUnusable: number;
  /** Client `runOnce` retries during the chaos, by answer. */
  readonly clientAnswers: { readonly accepted: number; readonly inProgress: number; readonly completed: number };
  /** Attempts after the first over all runs: takeovers of a killed worker's run. */
  readonly takeovers: number;
  /** `retryFrom("notify")` calls that took effect, without and with `resendOutbox`. */
  readonly retriedFrom: { readonly plain: number; readonly resend: number };
  /** What the webhook receiver got, counted by delivery key. */
  readonly outbox: {
    readonly messages: number;
    readonly deliveries: number;
    readonly redeliveries: number;
    /** New delivery keys the operator asked for with `resendOutbox` (must equal `retriedFrom.resend`). */
    readonly intendedResends: number;
  };
  /** The retention stage: retries and repeated signals for keys whose records expire and are swept. */
  readonly retention: {
    readonly intents: number;
    /** `runOnce` retries answered from the stored record (still retained). */
    readonly replays: number;
    /** `runOnce` and `enqueue` retries refused with IdempotencyKeyExpiredError (410 `key_expired`). */
    readonly keyExpired: number;
    /** Signals sent: one confirmation per run, then one repeat with each retry. */
    readonly signals: number;
    /** Repeats acknowledged with `expired: true` (the tombstone keeps no signals); the others were duplicates. */
    readonly expiredSignals: number;
    /** Retries that started the workflow again (counted under duplicate effects too). */
    readonly reExecutions: number;
  };
  /**
   * Effects (enqueue, authorise, notify, capture) beyond one per intent and
   * per rewind, messages under more delivery keys than asked for, a delivery
   * key with two payloads, and retries after retention that ran again. Must be 0.
   */
  readonly duplicateEffects: number;
  /** Intents not completed with their capture, with an effect missing, or a message that never arrived. Must be 0. */
  readonly lostIntents: number;
  /** Intents whose signal was not stored, accepted and merged exactly once with the payload sent. Must be 0. */
  readonly signalsNotOnce: number;
  /** Anything else broken: a rolled-back enqueue that exists, a conflict accepted, an unexpected error. Must be 0. */
  readonly otherViolations: number;
  /** The first violations found. */
  readonly problems: readonly string[];
  readonly seconds: number;
}

/** True when nothing was duplicated, lost, or delivered other than exactly once. */
export function durablePassed(r: DurableReport): boolean {
  return (
    r.duplicateEffects === 0 &&
    r.lostIntents === 0 &&
    r.signalsNotOnce === 0 &&
    r.acknowledgedUnusable === 0 &&
    r.otherViolations === 0
  );
}

/** The one line the scenario prints. */
export function durableSummaryLine(r: DurableReport): string {
  const o = r.outbox;
  const t = r.retention;
  return (
    `durable: intents ${r.intents}, worker kills ${r.kills}, takeovers ${r.takeovers}, signals sent ${r.signalsSent} ` +
    `(duplicates ${r.duplicateSignals}, conflicts refused ${r.conflictsRefused}, woke ${r.wokeByDelivery}), ` +
    `unusable refused ${r.unusableRefused}, retried from ${r.retriedFrom.plain + r.retriedFrom.resend} ` +
    `(resendOutbox ${r.retriedFrom.resend}), outbox ${o.messages} messages delivered ${o.deliveries} times ` +
    `(redeliveries ${o.redeliveries}, intended resends ${o.intendedResends}), retained ${t.intents} ` +
    `(replays ${t.replays}, key_expired ${t.keyExpired}, signals ${t.signals}, expired acknowledged ${t.expiredSignals}, ` +
    `re-executions ${t.reExecutions}), duplicate effects ${r.duplicateEffects}, lost intents ${r.lostIntents}, ` +
    `signals not delivered once ${r.signalsNotOnce}, acknowledged-but-unusable ${r.acknowledgedUnusable} ` +
    `(other violations ${r.otherViolations}, ${r.seconds} s)`
  );
}
