/** The closing check: each count the example expects beside the one it measured. */

/** One line of the check. */
export interface Check {
  readonly what: string;
  readonly expected: number;
  readonly actual: number;
}

/**
 * Print the checks as a table.
 *
 * @param okMessage the closing line when every count is right (after "OK: ").
 * @returns true when every measured count equals the expected one.
 */
export function printChecks(
  checks: readonly Check[],
  okMessage = "one ledger row per event, although the consumer saw 7 deliveries of 4 events.",
): boolean {
  const width = Math.max(...checks.map((c) => c.what.length));
  console.log(`\n${"check".padEnd(width)}  expected  actual`);
  const failed = checks.filter((c) => c.actual !== c.expected);
  for (const c of checks) {
    const verdict = c.actual === c.expected ? "ok" : "WRONG";
    console.log(
      `${c.what.padEnd(width)}  ${String(c.expected).padStart(8)}  ${String(c.actual).padStart(6)}  ${verdict}`,
    );
  }
  console.log(
    failed.length === 0 ? `\nOK: ${okMessage}` : `\nFAILED: ${failed.length} check(s) wrong (marked WRONG above).`,
  );
  return failed.length === 0;
}
