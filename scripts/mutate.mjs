#!/usr/bin/env node
/**
 * Mutation harness, run by hand (never in CI): apply each fault in
 * scripts/mutations/*.patch to packages/core/src, one at a time, run the
 * core suite (and with `--suites core,torture` the torture smoke too) and
 * report which tests caught it. `--repeat N` runs the suites N times per
 * fault and reports in how many of them it was caught. A fault no test catches is a hole in the suite.
 *
 *   node scripts/mutate.mjs                      # every patch, core suite only
 *   node scripts/mutate.mjs --only unfenced-phase-commit --suites core,torture
 *   node scripts/mutate.mjs --only unfenced-phase-commit --suites torture --repeat 3
 *   node scripts/mutate.mjs --list
 *   node scripts/mutate.mjs --check              # no suites: does each patch apply and type-check?
 *   node scripts/mutate.mjs --markdown out.md    # also write the table as Markdown
 *
 * Each patch is a plain `git diff` of packages/core/src. When the source has
 * moved on and a patch no longer applies, its row says STALE and the exit
 * code is 2: refresh it (apply by hand, fix, `git diff > scripts/mutations/NN-name.patch`).
 * The touched files are saved before a patch goes in and written back
 * afterwards, also when the suite crashes or the run is interrupted.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const root = resolve(import.meta.dirname, "..");
const patchDir = join(root, "scripts", "mutations");

const { values } = parseArgs({
  options: {
    only: { type: "string", multiple: true },
    suites: { type: "string", default: "core" },
    repeat: { type: "string", default: "1" },
    list: { type: "boolean", default: false },
    markdown: { type: "string" },
    "skip-baseline": { type: "boolean", default: false },
    check: { type: "boolean", default: false },
  },
});

const patches = readdirSync(patchDir)
  .filter((f) => f.endsWith(".patch"))
  .sort()
  .map((file) => ({ file, name: file.replace(/^\d+-/, "").replace(/\.patch$/, "") }));

if (values.list) {
  for (const p of patches) console.log(p.name);
  process.exit(0);
}
const chosen = values.only ? patches.filter((p) => values.only.includes(p.name)) : patches;
const unknown = (values.only ?? []).filter((n) => !patches.some((p) => p.name === n));
if (unknown.length > 0) {
  console.error(`unknown mutation(s): ${unknown.join(", ")}; see --list`);
  process.exit(2);
}

/** Files a patch touches, from its `+++ b/...` lines. */
function touchedFiles(patchText) {
  return [...patchText.matchAll(/^\+\+\+ b\/(.+)$/gm)].map((m) => m[1]);
}

function git(args, input) {
  return spawnSync("git", args, { cwd: root, input, encoding: "utf8" });
}

/** The saved contents of the files under mutation; written back by restore(). */
let saved = new Map();
function restore() {
  for (const [file, text] of saved) writeFileSync(join(root, file), text);
  saved = new Map();
}
/** The suite running now, stopped with the harness. */
let running;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    running?.kill("SIGTERM");
    restore();
    console.error(`\n${signal}: source restored`);
    process.exit(130);
  });
}
process.on("exit", restore);

/**
 * Run one vitest suite; returns the failed tests' names, or an error text
 * when vitest produced no report (a crash or a timeout of the whole run).
 */
async function runSuite(pkg, files, label) {
  const out = join(scratch, `${label}-${pkg}.json`);
  rmSync(out, { force: true });
  const args = ["--filter", `@idempo/${pkg}`, "exec", "vitest", "run", ...files];
  args.push("--reporter=dot", "--reporter=json", `--outputFile.json=${out}`);
  // Asynchronous, so an interrupt reaches the handler below (which restores the source) at once.
  const child = spawn("pnpm", args, { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
  running = child;
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d) => {
    stderr = (stderr + d).slice(-2000);
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 30 * 60_000);
  const status = await new Promise((resolve) => child.on("close", (code) => resolve(code)));
  clearTimeout(timer);
  running = undefined;
  if (!existsSync(out)) return { error: `no report (exit ${status}): ${stderr.slice(-400)}`, failed: [] };
  const report = JSON.parse(readFileSync(out, "utf8"));
  const failed = [];
  for (const file of report.testResults) {
    const rel = file.name.replace(`${root}/packages/${pkg}/`, "");
    const failedTests = file.assertionResults.filter((a) => a.status === "failed");
    for (const a of failedTests) {
      failed.push(`${rel} > ${a.fullName}`);
      const why = String(a.failureMessages?.[0] ?? "").split("\n")[0];
      console.error(`  failed: ${rel} > ${a.fullName}: ${why.slice(0, 200)}`);
    }
    // A file that failed to load, or failed in a hook, has no failed test of its own.
    if (file.status === "failed" && failedTests.length === 0)
      failed.push(`${rel} (file failed: ${file.message ?? ""})`);
  }
  return { error: undefined, failed, passed: report.numPassedTests };
}

const suites = values.suites.split(",").map((x) => x.trim());
const unknownSuites = suites.filter((x) => x !== "core" && x !== "torture");
if (unknownSuites.length > 0 || suites.length === 0) {
  console.error(`--suites takes core and/or torture, got ${values.suites}`);
  process.exit(2);
}
const repeat = Number(values.repeat);
if (!Number.isSafeInteger(repeat) || repeat < 1) {
  console.error(`--repeat must be a positive integer, got ${values.repeat}`);
  process.exit(2);
}

const scratch = mkdtempSync(join(tmpdir(), "idempo-mutate-"));

/** Run the chosen suites once; failed tests of all of them, and the first error of a suite that did not run. */
async function runAll(label) {
  const results = [];
  for (const suite of suites)
    results.push(
      await (suite === "core" ? runSuite("core", [], label) : runSuite("torture", ["test/smoke.test.ts"], label)),
    );
  return { failed: results.flatMap((r) => r.failed), error: results.find((r) => r.error)?.error };
}

const rows = [];
// A fault left in the source (an interrupted run, a stray commit) would make every verdict below wrong.
const alreadyIn = patches.filter(
  (p) => git(["apply", "--check", "-R", "-"], readFileSync(join(patchDir, p.file), "utf8")).status === 0,
);
if (alreadyIn.length > 0) {
  console.error(
    `packages/core/src already contains the fault(s) ${alreadyIn.map((p) => p.name).join(", ")}; restore it first`,
  );
  process.exit(2);
}

if (values.check) {
  // Cheap upkeep after the source moves: apply each patch, type-check core, restore. No test runs.
  let bad = 0;
  for (const p of chosen) {
    const text = readFileSync(join(patchDir, p.file), "utf8");
    const check = git(["apply", "--check", "-"], text);
    if (check.status !== 0) {
      bad++;
      console.log(`${p.name}: STALE (${check.stderr.trim().split("\n")[0]})`);
      continue;
    }
    for (const file of touchedFiles(text)) saved.set(file, readFileSync(join(root, file), "utf8"));
    try {
      const applied = git(["apply", "-"], text);
      if (applied.status !== 0) throw new Error(`git apply failed: ${applied.stderr}`);
      const tsc = spawnSync("pnpm", ["--filter", "@idempo/core", "exec", "tsc", "--noEmit", "-p", "tsconfig.json"], {
        cwd: root,
        encoding: "utf8",
      });
      if (tsc.status === 0) console.log(`${p.name}: applies and type-checks`);
      else {
        bad++;
        console.log(`${p.name}: DOES NOT TYPE-CHECK\n${tsc.stdout.trim().split("\n").slice(0, 5).join("\n")}`);
      }
    } finally {
      restore();
    }
  }
  rmSync(scratch, { recursive: true, force: true });
  process.exit(bad > 0 ? 2 : 0);
}

let baselineFailures = new Set();
if (!values["skip-baseline"]) {
  if (git(["diff", "--quiet", "--", "packages/core/src"]).status !== 0)
    console.error("note: packages/core/src has uncommitted changes; the patches apply on top of them");
  console.error("baseline (no mutation) ...");
  const base = await runAll("baseline");
  if (base.error) {
    console.error(`baseline suite did not run: ${base.error}`);
    process.exit(2);
  }
  baselineFailures = new Set(base.failed);
  if (baselineFailures.size > 0) {
    console.error(`baseline has ${baselineFailures.size} failing test(s); they are ignored below:`);
    for (const f of baselineFailures) console.error(`  ${f}`);
  }
}

let stale = 0;
for (const p of chosen) {
  const text = readFileSync(join(patchDir, p.file), "utf8");
  const check = git(["apply", "--check", "-"], text);
  if (check.status !== 0) {
    stale++;
    rows.push({ name: p.name, verdict: "STALE", caughtBy: [], note: check.stderr.trim().split("\n")[0] });
    console.error(`${p.name}: STALE, the patch no longer applies (${check.stderr.trim().split("\n")[0]})`);
    continue;
  }
  for (const file of touchedFiles(text)) saved.set(file, readFileSync(join(root, file), "utf8"));
  const started = Date.now();
  const rounds = [];
  try {
    const applied = git(["apply", "-"], text);
    if (applied.status !== 0) throw new Error(`git apply failed: ${applied.stderr}`);
    for (let r = 1; r <= repeat; r++) {
      console.error(`${p.name}: applied, running ${suites.join(" + ")}${repeat > 1 ? ` (${r}/${repeat})` : ""} ...`);
      const result = await runAll(`${p.name}-${r}`);
      rounds.push({ failed: result.failed.filter((f) => !baselineFailures.has(f)), error: result.error });
    }
  } finally {
    restore();
  }
  const caught = rounds.filter((r) => r.failed.length > 0).length;
  const failed = [...new Set(rounds.flatMap((r) => r.failed))];
  const error = rounds.find((r) => r.error)?.error;
  const verdict =
    caught === repeat ? "caught" : caught > 0 ? `caught in ${caught} of ${repeat}` : error ? "ERROR" : "MISSED";
  const seconds = Math.round((Date.now() - started) / 1000);
  rows.push({ name: p.name, verdict, caughtBy: failed, note: error ?? "" });
  console.error(`${p.name}: ${verdict} (${failed.length} failing test(s), ${seconds} s)`);
}

const cell = (s) => s.replaceAll("|", "\\|");
const lines = [
  "| fault | verdict | tests that failed |",
  "| --- | --- | --- |",
  ...rows.map((r) => {
    const shown = r.caughtBy.slice(0, 4).map(cell).join("<br>");
    const more = r.caughtBy.length > 4 ? `<br>... ${r.caughtBy.length - 4} more` : "";
    const note = r.note ? cell(r.note.slice(0, 120)) : "";
    return `| ${r.name} | ${r.verdict}${r.caughtBy.length ? ` (${r.caughtBy.length})` : ""} | ${shown}${more}${!shown ? note : ""} |`;
  }),
];
console.log(lines.join("\n"));
if (values.markdown) writeFileSync(values.markdown, `${lines.join("\n")}\n`);
rmSync(scratch, { recursive: true, force: true });
const missed = rows.filter((r) => r.verdict !== "caught").length;
if (repeat > 1) console.log(`(each fault run ${repeat} times; "caught" means caught every time)`);
process.exit(stale > 0 ? 2 : missed > 0 ? 1 : 0);
