import type { ChaosCounters } from "./chaos.ts";
import type { OperatorVerdict } from "./operator-scenario.ts";
import type { DurableReport } from "./scenarios/durable-report.ts";
import { durablePassed, durableSummaryLine } from "./scenarios/durable-report.ts";
import type { FanoutReport } from "./scenarios/fanout-report.ts";
import { fanoutPassed, fanoutSummaryLine } from "./scenarios/fanout-report.ts";

/** The outcome of one torture run. */
export interface Report {
  /** Intents minted and run (one run each). */
  readonly runs: number;
  /** Intents asked for; `runs` falls short only when the time budget ran out. */
  readonly target: number;
  /** Workers that died of SIGKILL while the chaos ran (sent by the driver, or armed at a boundary). */
  readonly kills: number;
  /** Attempts after the first, over all runs: each one took over an expired lease. */
  readonly takeovers: number;
  /** Writes refused to an attempt that had lost its lease (LeaseLostError). */
  readonly fenced: number;
  /** Zombie writes a business unique constraint refused before idempo's fence was reached. */
  readonly refusedByConstraint: number;
  /** Clients answered with a replay or a 409 because another client had sent the key. */
  readonly duplicatesSeen: number;
  /** Business effects, provider operations or outbox messages beyond one per intent, the operator scenario's included. Must be 0. */
  readonly duplicateEffects: number;
  /**
   * Intents not completed, or with an effect, operation or delivery missing, the operator
   * scenario's included (there a parked or canceled intent is answered when its stored record says so). Must be 0.
   */
  readonly lostIntents: number;
  /** Every other broken promise: a replay that differs, a wrong derived or delivery key, a response that disagrees with the effects. Must be 0. */
  readonly otherViolations: number;
  readonly chaos: ChaosCounters;
  /** The operator scenario (poison runs and verbs racing live owners); absent when it was not run. */
  readonly operators?: OperatorVerdict | undefined;
  /** Runs `resumeStale` finished after the chaos. */
  readonly resumedAtEnd: number;
  /** Intents whose client gave up before any attempt claimed the key, retried once after the chaos. */
  readonly retriedAtEnd: number;
  readonly providerCalls: number;
  readonly providerOperations: number;
  readonly deliveries: number;
  readonly messages: number;
  /** What clients were told besides responses. */
  readonly clientErrors: {
    readonly inProgress: number;
    readonly leaseLost: number;
    readonly unavailable: number;
    /** Of the 503s, those naming a COMMIT that may have landed. */
    readonly inDoubt: number;
    readonly providerUnavailable: number;
  };
  /** Errors clients saw that are neither idempo's nor a lost connection. */
  readonly unexpected: readonly { code: string; count: number; sample: string }[];
  /** The first violations found, for the log. */
  readonly problems: readonly string[];
  readonly seconds: number;
  readonly database: string;
  /** The durable scenario (sleeps, signals, worker kills), when it ran: see `scenarios/durable-waits.ts`. */
  readonly durable?: DurableReport;
  /** The fan-out scenario (parallel branches, children, limits, worker kills), when it ran: see `scenarios/fanout.ts`. */
  readonly fanout?: FanoutReport;
}

/** True when nothing was duplicated, lost or otherwise broken, and every intent asked for ran. */
export function passed(report: Report): boolean {
  return (
    report.duplicateEffects === 0 &&
    report.lostIntents === 0 &&
    report.otherViolations === 0 &&
    report.runs >= report.target &&
    (report.durable === undefined || durablePassed(report.durable)) &&
    (report.fanout === undefined || fanoutPassed(report.fanout))
  );
}

/** The one line a run prints. */
export function summaryLine(r: Report): string {
  const c = r.chaos;
  return (
    `torture: runs ${r.runs}, kills ${r.kills}, takeovers ${r.takeovers}, zombie writes fenced ${r.fenced}, ` +
    `duplicates seen by clients ${r.duplicatesSeen}, duplicate effects ${r.duplicateEffects}, lost intents ${r.lostIntents} ` +
    `(other violations ${r.otherViolations}; backends terminated ${c.terminated}, pauses ${c.pauses}, storms ${c.storms}, ` +
    `server restarts ${c.restarts}, resumed at end ${r.resumedAtEnd}, ${r.seconds} s)`
  );
}

/** The operator scenario's line, if it ran. */
function operatorLine(o: OperatorVerdict): string {
  return (
    `operators: ${o.intents} intents, released ${o.released}, canceled ${o.canceled}, retried from ${o.retriedFrom}, ` +
    `unforced deletes refused ${o.refusedDeletes}, forgotten ${o.forgotten}, poison runs parked ${o.parked}; ` +
    `duplicate effects ${o.duplicateEffects}, lost intents ${o.lostIntents}, other violations ${o.otherViolations}`
  );
}

/** What to print after the line: errors worth a look and the first violations. */
export function details(r: Report): string[] {
  const lines = [
    `provider: ${r.providerCalls} calls, ${r.providerOperations} operations; outbox: ${r.messages} messages, ` +
      `${r.deliveries} deliveries; kills armed at a boundary ${r.chaos.killsArmed}, sent ${r.chaos.killsSent}; ` +
      `retried at end ${r.retriedAtEnd}; zombie writes refused by a unique constraint ${r.refusedByConstraint}; ` +
      `zombie rounds (zombie woken while its successor was held) ${r.chaos.zombies}, without a zombie ${r.chaos.zombieMisses}`,
  ];
  if (r.operators) lines.push(operatorLine(r.operators));
  const e = r.clientErrors;
  lines.push(
    `clients: 409 key_in_progress ${e.inProgress}, 409 lease_lost ${e.leaseLost}, ` +
      `503 database_unavailable ${e.unavailable} (a COMMIT in doubt ${e.inDoubt}), ` +
      `provider 503 after every retry ${e.providerUnavailable}`,
  );
  for (const u of r.unexpected) lines.push(`unexpected error ${u.code} x${u.count}, e.g. ${u.sample}`);
  if (r.durable) {
    lines.push(durableSummaryLine(r.durable));
    for (const p of r.durable.problems.slice(0, 20)) lines.push(`durable violation: ${p}`);
  }
  if (r.fanout) {
    lines.push(fanoutSummaryLine(r.fanout));
    for (const p of r.fanout.problems.slice(0, 20)) lines.push(`fan-out violation: ${p}`);
  }
  for (const p of r.problems.slice(0, 20)) lines.push(`violation: ${p}`);
  if (r.problems.length > 20) lines.push(`... and ${r.problems.length - 20} more`);
  return lines;
}
