/** The closing table: each count the demo expects next to the one it measured. */

/** One row of the summary. */
export interface Count {
  readonly what: string;
  readonly expected: number;
  readonly actual: number;
}

/**
 * Print the summary table.
 *
 * @returns true when every actual count equals the expected one.
 */
export function printSummary(counts: readonly Count[]): boolean {
  const width = Math.max(...counts.map((c) => c.what.length));
  console.log(`\n${"".padEnd(width)}  expected  actual`);
  let ok = true;
  for (const c of counts) {
    const match = c.actual === c.expected;
    ok &&= match;
    console.log(
      `${c.what.padEnd(width)}  ${String(c.expected).padStart(8)}  ${String(c.actual).padStart(6)}  ${match ? "ok" : "WRONG"}`,
    );
  }
  console.log(
    ok
      ? "\nEvery count is as expected: one run per tick, each period charged at most once, each decline retried a day later."
      : "\nSome counts are wrong (see WRONG above).",
  );
  return ok;
}
