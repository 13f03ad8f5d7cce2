/** The closing table: each count the demo expects next to the one it measured. */

/** One row of the summary: an exact count, or a bound (`atMost`) the measured value must stay within. */
export interface Count {
  readonly what: string;
  readonly expected: number;
  readonly actual: number;
  /** The expected value is an upper bound, not an exact count (a limit). */
  readonly atMost?: boolean;
}

/**
 * Print the summary table.
 *
 * @returns true when every actual count equals the expected one, or stays within it for a bound.
 */
export function printSummary(counts: readonly Count[]): boolean {
  const width = Math.max(...counts.map((c) => c.what.length));
  console.log(`\n${"".padEnd(width)}  expected  actual`);
  let ok = true;
  for (const c of counts) {
    const match = c.atMost ? c.actual <= c.expected : c.actual === c.expected;
    ok &&= match;
    const expected = c.atMost ? `<= ${c.expected}` : String(c.expected);
    console.log(
      `${c.what.padEnd(width)}  ${expected.padStart(8)}  ${String(c.actual).padStart(6)}  ${match ? "ok" : "WRONG"}`,
    );
  }
  console.log(
    ok
      ? "\nEvery count is as expected: one transfer per seller and order, no merchant over its limit, the provider under its rate."
      : "\nSome counts are wrong (see WRONG above).",
  );
  return ok;
}
