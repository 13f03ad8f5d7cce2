/** The outcome of the failover scenario, and the lines it prints. */
import type { Report } from "../report.ts";
import { details as mainDetails, passed as mainPassed, summaryLine as mainSummary } from "../report.ts";
import type { HttpVerdict } from "./http-verdict.ts";

export interface FailoverReport {
  /** The fleet's run (workers, relays, resumers, clients, chaos) on the cluster. */
  readonly main: Report;
  /** The HTTP example's service and its callers, on the same cluster. */
  readonly http: HttpVerdict;
  readonly seconds: number;
}

/** The three numbers that must be 0, over both halves. */
function failoverTotals(r: FailoverReport): { duplicates: number; lost: number; other: number } {
  return {
    duplicates: r.main.duplicateEffects + r.http.duplicateEffects,
    lost: r.main.lostIntents + r.http.lostIntents,
    other: r.main.otherViolations + r.http.otherViolations,
  };
}

/** Nothing duplicated, lost or broken on either side, every intent made, and at least one primary failed over. */
export function failoverPassed(r: FailoverReport): boolean {
  const t = failoverTotals(r);
  return (
    mainPassed(r.main) &&
    t.duplicates + t.lost + t.other === 0 &&
    r.main.chaos.primaryKills + r.main.chaos.switchovers > 0
  );
}

/** The one line the scenario prints. */
export function failoverSummaryLine(r: FailoverReport): string {
  const t = failoverTotals(r);
  const c = r.main.chaos;
  const e = r.main.clientErrors;
  return (
    `failover: primary kills ${c.primaryKills}, switchovers ${c.switchovers}, intents ${r.main.runs} + ` +
    `${r.http.intents} over HTTP, duplicate effects ${t.duplicates}, lost intents ${t.lost} ` +
    `(other violations ${t.other}; 503s ${e.unavailable + r.http.tally.unavailable}, COMMIT in doubt ${e.inDoubt}, ` +
    `worker kills ${r.main.kills}, takeovers ${r.main.takeovers}, ${r.seconds} s)`
  );
}

/** What to print after the line. */
export function failoverDetails(r: FailoverReport): string[] {
  const h = r.http;
  return [
    mainSummary(r.main),
    ...mainDetails(r.main),
    `http: ${h.answered}/${h.intents} charges answered (${h.declined} declined), ${h.tally.requests} requests, ` +
      `409 ${h.tally.inProgress}, 5xx ${h.tally.unavailable}, no answer ${h.tally.noAnswer}; card network ` +
      `${h.networkCalls} calls, ${h.authorizations} authorizations; duplicate effects ${h.duplicateEffects}, ` +
      `lost intents ${h.lostIntents}, other violations ${h.otherViolations}`,
    ...h.problems.slice(0, 20).map((p) => `http violation: ${p}`),
  ];
}
