/**
 * What `crashAtEveryBoundary` found, as data for assertions and as a table
 * a person can read in a failed test's output.
 */

/** How often one declared effect happened during one boundary's run. */
export interface EffectCount {
  /** How often it should have happened: `perRun` of the effect. */
  readonly expected: number;
  /** How often it did (the counter's change), or `null` when the counter threw or returned no number. */
  readonly actual: number | null;
}

/** The result of crashing one run at one boundary and letting a retry finish it. */
export interface BoundaryResult {
  /** The boundary crashed at, e.g. `called:step:charge`; `none` for the run without a crash. */
  readonly point: string;
  /** The idempotency key this run used. */
  readonly key: string;
  /**
   * `passed`; `failed` (see `problems`); `skipped` when a run without a crash
   * never reaches this boundary (it finished earlier, e.g. with `ctx.fail`).
   */
  readonly outcome: "passed" | "failed" | "skipped";
  /** Status of the response the retry returned; `null` when it threw or the boundary was skipped. */
  readonly status: number | null;
  /** Attempts the record counts once finished (1 + takeovers); `null` when there is no record. */
  readonly attempts: number | null;
  /** Every declared effect: expected and actual count for this one run. */
  readonly effects: Readonly<Record<string, EffectCount>>;
  /**
   * Per step (and per branch of a parallel item, named `<item>/<branch>`):
   * the distinct derived keys the run recorded for it across all attempts.
   * Exactly one, equal to `deriveStepKey(...)`, is correct; empty when the
   * step did not run.
   */
  readonly derivedKeys: Readonly<Record<string, readonly string[]>>;
  /** What went wrong, one sentence each, with a hint where one helps. Empty when passed. */
  readonly problems: readonly string[];
}

/** The report of {@link crashAtEveryBoundary}; pass it to {@link assertExactlyOnce}. */
export interface CrashReport {
  /** True when the run without a crash and every boundary passed (skipped ones do not count against it). */
  readonly ok: boolean;
  /** The workflow's name. */
  readonly workflow: string;
  /** The tenant every run used. */
  readonly tenantId: string;
  /** The run without a crash: checks the counters and fixes the expected status. */
  readonly baseline: BoundaryResult;
  /** One entry per boundary, in the order a run passes them. */
  readonly boundaries: readonly BoundaryResult[];
  /** The entries of `baseline` and `boundaries` that failed. */
  readonly failures: readonly BoundaryResult[];
  /** A plain-text table of every run, followed by the problems found. */
  readonly table: string;
}

function cell(r: BoundaryResult, effect: string): string {
  const e = r.effects[effect];
  if (!e || r.outcome === "skipped") return "-";
  if (e.actual === null) return "error";
  return e.actual === e.expected ? String(e.actual) : `${e.actual} (want ${e.expected})`;
}

function keysCell(r: BoundaryResult): string {
  if (r.outcome === "skipped") return "-";
  const parts = Object.entries(r.derivedKeys)
    .filter(([, keys]) => keys.length > 0)
    .map(([step, keys]) => `${step}:${keys.length}`);
  return parts.length > 0 ? parts.join(" ") : "-";
}

/** Render the rows as an aligned table with the problems listed under it. */
export function renderTable(workflow: string, rows: readonly BoundaryResult[], effects: readonly string[]): string {
  const header = ["boundary", "result", "status", "attempts", ...effects, "derived keys"];
  const lines = rows.map((r) => [
    r.point === "none" ? "(no crash)" : r.point,
    r.outcome === "passed" ? "ok" : r.outcome === "failed" ? "FAILED" : "skipped",
    r.status === null ? "-" : String(r.status),
    r.attempts === null ? "-" : String(r.attempts),
    ...effects.map((e) => cell(r, e)),
    keysCell(r),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
  const format = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  const failed = rows.filter((r) => r.outcome === "failed");
  const crashRuns = rows.filter((r) => r.point !== "none");
  const title =
    failed.length === 0
      ? `crashAtEveryBoundary(${workflow}): every effect exactly once at ${crashRuns.filter((r) => r.outcome === "passed").length} boundaries`
      : `crashAtEveryBoundary(${workflow}): ${failed.length} of ${rows.length} runs FAILED`;
  const out = [title, "", format(header), ...lines.map(format)];
  if (failed.length > 0) {
    out.push("", "problems:");
    for (const r of failed) {
      for (const p of r.problems) out.push(`  ${r.point === "none" ? "(no crash)" : r.point}: ${p}`);
    }
  }
  return out.join("\n");
}

/**
 * Thrown by {@link assertExactlyOnce}: some boundary repeated or lost an
 * effect, or the retry did not finish the run. `report` holds the details;
 * the message is the report's table.
 */
export class ExactlyOnceError extends Error {
  /** The report that failed. */
  readonly report: CrashReport;
  constructor(report: CrashReport) {
    super(report.table);
    this.name = "ExactlyOnceError";
    this.report = report;
  }
}

/**
 * Throw an {@link ExactlyOnceError} whose message is the report's table when
 * any boundary failed; return quietly when every one passed.
 *
 * @example
 * assertExactlyOnce(await crashAtEveryBoundary(engine, checkout, input, { effects }))
 */
export function assertExactlyOnce(report: CrashReport): void {
  if (!report.ok) throw new ExactlyOnceError(report);
}
