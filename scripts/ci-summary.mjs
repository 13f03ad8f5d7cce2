#!/usr/bin/env node
// Sums the vitest JSON reports of every package and example into one line:
//   vitest: N passed, N failed, N skipped
// and names each failed test with the first lines of its error, so the end of
// a CI log says what failed even when the suites' output above is cut.
// Exits 1 when a test or a test file failed, or when no report exists at all
// (a run that ran no test must not count as green).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const groups = ["packages", "examples"];

const reports = groups.flatMap((group) => {
  const dir = join(root, group);
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(dir, entry.name, ".vitest", "results.json"))
    .filter((file) => existsSync(file));
});

const totals = { passed: 0, failed: 0, skipped: 0 };
const problems = [];
const failures = [];
const MAX_FAILURES = 20;
const MAX_MESSAGE = 600;
for (const file of reports) {
  const name = relative(root, file);
  let report;
  try {
    report = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    problems.push(`${name}: unreadable (${error instanceof Error ? error.message : String(error)})`);
    continue;
  }
  const count = (key) => (Number.isInteger(report[key]) ? report[key] : 0);
  totals.passed += count("numPassedTests");
  totals.failed += count("numFailedTests");
  totals.skipped += count("numPendingTests") + count("numTodoTests");
  for (const suite of report.testResults ?? []) {
    const where = relative(root, suite.name ?? name);
    for (const test of suite.assertionResults ?? []) {
      if (test.status !== "failed") continue;
      const message = String(test.failureMessages?.[0] ?? "")
        .split("\n")
        .slice(0, 3)
        .join("\n  ");
      failures.push(`${where} > ${test.fullName ?? test.title}\n  ${message.slice(0, MAX_MESSAGE)}`);
    }
    const failedTests = (suite.assertionResults ?? []).filter((test) => test.status === "failed").length;
    if (failedTests === 0 && suite.status === "failed") {
      failures.push(`${where}: ${String(suite.message ?? "failed to run").slice(0, MAX_MESSAGE)}`);
    }
  }
  // A file that fails to load, or an unhandled error, fails the run without failing a test.
  if (count("numFailedTests") === 0 && (report.success === false || count("numFailedTestSuites") > 0)) {
    problems.push(`${name}: the run failed outside of a test (a file that did not load, or an unhandled error)`);
  }
}

console.log(`vitest: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (reports.length === 0)
  problems.push("no vitest results found (packages/*/.vitest/results.json, examples/*/.vitest/results.json)");
for (const failure of failures.slice(0, MAX_FAILURES)) console.error(`failed: ${failure}`);
if (failures.length > MAX_FAILURES) console.error(`failed: ... and ${failures.length - MAX_FAILURES} more`);
for (const problem of problems) console.error(`ci-summary: ${problem}`);
process.exit(totals.failed > 0 || problems.length > 0 ? 1 : 0);
