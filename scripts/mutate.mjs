#!/usr/bin/env node
/**
 * Mutation harness: apply each fault in scripts/mutations/*.patch, one at a
 * time, run the core suite (and with `--suites core,torture` the torture
 * smoke too) and report which tests caught it. A fault no test catches is a
 * hole in the suite. `--check` (no tests) runs in CI.
 *
 *   node scripts/mutate.mjs                      # every patch: its own tests, then the core suite if they miss it
 *   node scripts/mutate.mjs --bail               # stop each run at its first failing test (a verdict, not a list)
 *   node scripts/mutate.mjs --whole              # the whole core suite for every patch (the full list of catchers)
 *   node scripts/mutate.mjs --only unfenced-phase-commit --suites core,torture
 *   node scripts/mutate.mjs --only unfenced-phase-commit --suites torture --repeat 3
 *   node scripts/mutate.mjs --list
 *   node scripts/mutate.mjs --check              # no suites: does each patch apply, type-check and migrate? (in a scratch copy)
 *   node scripts/mutate.mjs --markdown out.md    # also write the table as Markdown
 *
 * Each patch is a plain `git diff` of packages/core/src and/or migrations/
 * (a statement function is changed in the migration that defines it last,
 * and the same way in migrations/current/schema.sql, which the schema-drift
 * test compares with the migrations), after a short preamble that git ignores: one line saying what the fault
 * is, and a `tests:` line naming the core test files (relative to
 * packages/core) most likely to catch it. Those run first; only when none of
 * them fails does the whole core suite run. `--repeat N` runs each fault N
 * times and reports in how many of them it was caught.
 *
 * A migration mutation needs no step of its own to reach the tests: every
 * vitest run migrates a new template database (packages/testkit, template.ts)
 * from the top-level migrations/ folder as it is on disk, and each test file
 * clones that template, so nothing migrated is cached between runs. A
 * mutated migration that no longer migrates would fail every test file and
 * pass for "caught": it is migrated on PGlite first, and such a patch is
 * reported BROKEN instead.
 *
 * When the source has moved on and a patch no longer applies, its row says
 * STALE and the exit code is 2: refresh it (apply by hand, fix, `git diff`
 * it back into its file under its preamble). The touched files are saved
 * before a patch goes in and written back afterwards, also when the suite
 * crashes or the run is interrupted.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { checkPatches, migrationError } from "./mutation-check.mjs";

const root = resolve(import.meta.dirname, "..");
const patchDir = join(root, "scripts", "mutations");
const coreDir = join(root, "packages", "core");

const { values } = parseArgs({
  options: {
    only: { type: "string", multiple: true },
    suites: { type: "string", default: "core" },
    repeat: { type: "string", default: "1" },
    list: { type: "boolean", default: false },
    markdown: { type: "string" },
    "skip-baseline": { type: "boolean", default: false },
    check: { type: "boolean", default: false },
    bail: { type: "boolean", default: false },
    whole: { type: "boolean", default: false },
  },
});

/** Files a patch touches, from its `+++ b/...` lines. */
function touchedFiles(patchText) {
  return [...patchText.matchAll(/^\+\+\+ b\/(.+)$/gm)].map((m) => m[1]);
}

/** What a patch may touch: the core's source, a numbered migration, the current schema file. */
const MUTABLE = /^(packages\/core\/src\/.+|migrations\/(\d{4}_[a-z0-9_]+|current\/schema)\.sql)$/;

const patches = readdirSync(patchDir)
  .filter((f) => f.endsWith(".patch"))
  .sort()
  .map((file) => {
    const text = readFileSync(join(patchDir, file), "utf8");
    const preamble = text.slice(0, Math.max(0, text.indexOf("diff --git")));
    const tests = (/^tests:(.*)$/m.exec(preamble)?.[1] ?? "").split(/\s+/).filter(Boolean);
    const files = touchedFiles(text);
    return { file, name: file.replace(/^\d+-/, "").replace(/\.patch$/, ""), text, tests, files };
  });

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
const outside = patches.flatMap((p) => p.files.filter((f) => !MUTABLE.test(f)).map((f) => `${p.file}: ${f}`));
if (outside.length > 0) {
  console.error(`patches may touch packages/core/src and migrations/*.sql only:\n  ${outside.join("\n  ")}`);
  process.exit(2);
}

// schema-drift.test.ts fails when a function of the migrations differs from migrations/current/schema.sql:
// a patch that changed only one of them would be caught by that test alone, whatever its fault.
const CURRENT_SCHEMA = "migrations/current/schema.sql";
const lopsided = existsSync(join(root, CURRENT_SCHEMA))
  ? patches.filter((p) => p.files.some((f) => /^migrations\/\d{4}_/.test(f)) !== p.files.includes(CURRENT_SCHEMA))
  : [];
if (lopsided.length > 0) {
  console.error(
    `a patch that changes a migration must change ${CURRENT_SCHEMA} the same way (and only then): ${lopsided.map((p) => p.file).join(", ")}`,
  );
  process.exit(2);
}

function git(args, input) {
  return spawnSync("git", args, { cwd: root, input, encoding: "utf8" });
}

/** The saved contents of the files under mutation (null: the file did not exist); written back by restore(). */
let saved = new Map();
function restore() {
  for (const [file, text] of saved) {
    if (text === null) rmSync(join(root, file), { force: true });
    else writeFileSync(join(root, file), text);
  }
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

/** Save the files a patch touches, then apply it; restore() undoes both. */
function applyPatch(p) {
  for (const file of p.files) {
    const path = join(root, file);
    saved.set(file, existsSync(path) ? readFileSync(path, "utf8") : null);
  }
  const applied = git(["apply", "-"], p.text);
  if (applied.status !== 0) throw new Error(`git apply failed: ${applied.stderr}`);
}

/** Why a patch cannot be applied to the current source, or undefined when it can. */
function staleness(p) {
  const check = git(["apply", "--check", "-"], p.text);
  return check.status === 0 ? undefined : check.stderr.trim().split("\n")[0];
}

const touchesMigrations = (p) => p.files.some((f) => f.startsWith("migrations/"));

const alreadyIn = patches.filter((p) => git(["apply", "--check", "-R", "-"], p.text).status === 0);
if (alreadyIn.length > 0) {
  // A fault left in the source (an interrupted run, a stray commit) would make every verdict below wrong.
  console.error(
    `the source already contains the fault(s) ${alreadyIn.map((p) => p.name).join(", ")}; restore it first`,
  );
  process.exit(2);
}

if (values.check) {
  // Cheap upkeep after the source moves, in a scratch copy (scripts/mutation-check.mjs): the
  // checkout never holds a fault, so this may run beside the tests and the pack check.
  process.exit(checkPatches(root, chosen) > 0 ? 2 : 0);
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
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

/**
 * Run one vitest suite (`files` empty: all of it); returns the failed tests'
 * names, or an error text when vitest produced no report (a crash or a
 * timeout of the whole run). `bail` stops it at the first failing test.
 */
async function runSuite(pkg, files, label, bail) {
  const out = join(scratch, `${label}-${pkg}.json`);
  rmSync(out, { force: true });
  const args = ["--filter", `@idempo/${pkg}`, "exec", "vitest", "run", ...files];
  args.push("--reporter=dot", "--reporter=json", `--outputFile.json=${out}`);
  if (bail) args.push("--bail", "1");
  // Asynchronous, so an interrupt reaches the handler above (which restores the source) at once.
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
  return { error: undefined, failed };
}

/**
 * Run the chosen suites once, the core suite on `coreFiles` only (empty: all
 * of it); failed tests of all of them, and the first error of a suite that did not run.
 */
async function runAll(label, coreFiles, bail) {
  const results = [];
  for (const suite of suites)
    results.push(
      await (suite === "core"
        ? runSuite("core", coreFiles, label, bail)
        : runSuite("torture", ["test/smoke.test.ts"], label, bail)),
    );
  return { failed: results.flatMap((r) => r.failed), error: results.find((r) => r.error)?.error };
}

/**
 * Tests that fail with no fault in, ignored in every verdict: those of the
 * patches' own test files (run once before the first patch), and those of
 * the whole suite (run when a patch first needs it, with that patch taken
 * out meanwhile).
 */
const known = new Set();
const baselineDone = { own: false, whole: false };
async function baseline(kind, applied) {
  if (values["skip-baseline"] || baselineDone[kind]) return;
  baselineDone[kind] = true;
  const files = kind === "own" ? [...new Set(chosen.flatMap((p) => p.tests))] : [];
  if (applied) restore();
  console.error(`baseline (no mutation) on ${kind === "own" ? files.join(" ") : "the whole core suite"} ...`);
  const base = await runAll(`baseline-${kind}`, files, false);
  if (applied) applyPatch(applied);
  if (base.error) {
    console.error(`baseline suite did not run: ${base.error}`);
    process.exit(2);
  }
  if (base.failed.length > 0) {
    console.error(`baseline has ${base.failed.length} failing test(s); they are ignored below:`);
    for (const f of base.failed) console.error(`  ${f}`);
  }
  for (const f of base.failed) known.add(f);
}

/** The patch's own tests first (unless --whole), then the whole core suite when they did not catch it. */
async function oneRound(p, label) {
  if (!values.whole && p.tests.length > 0 && suites.includes("core")) {
    const first = await runAll(`${label}-own`, p.tests, values.bail);
    const failed = first.failed.filter((f) => !known.has(f));
    if (failed.length > 0) return { failed, error: first.error, where: "its own tests" };
  }
  await baseline("whole", p);
  const whole = await runAll(`${label}-whole`, [], values.bail);
  return { failed: whole.failed.filter((f) => !known.has(f)), error: whole.error, where: "whole suite" };
}

if (git(["diff", "--quiet", "--", "packages/core/src", "migrations"]).status !== 0)
  console.error("note: packages/core/src or migrations/ has uncommitted changes; the patches apply on top of them");

if (!values.whole && suites.includes("core") && chosen.some((p) => p.tests.length > 0)) await baseline("own");
const rows = [];
let unusable = 0;
for (const p of chosen) {
  const stale = staleness(p);
  if (stale) {
    unusable++;
    rows.push({ name: p.name, verdict: "STALE", caughtBy: [], where: "", note: stale });
    console.error(`${p.name}: STALE, the patch no longer applies (${stale})`);
    continue;
  }
  const started = Date.now();
  const rounds = [];
  let broken;
  try {
    applyPatch(p);
    broken = touchesMigrations(p) ? migrationError(coreDir) : undefined;
    for (let r = 1; r <= repeat && !broken; r++) {
      console.error(`${p.name}: applied, running ${suites.join(" + ")}${repeat > 1 ? ` (${r}/${repeat})` : ""} ...`);
      rounds.push(await oneRound(p, `${p.name}-${r}`));
    }
  } finally {
    restore();
  }
  if (broken) {
    unusable++;
    rows.push({ name: p.name, verdict: "BROKEN", caughtBy: [], where: "", note: `does not migrate: ${broken}` });
    console.error(`${p.name}: BROKEN, the mutated migrations do not apply (${broken})`);
    continue;
  }
  const caught = rounds.filter((r) => r.failed.length > 0).length;
  const failed = [...new Set(rounds.flatMap((r) => r.failed))];
  const where = [...new Set(rounds.filter((r) => r.failed.length > 0).map((r) => r.where))].join(", ");
  const error = rounds.find((r) => r.error)?.error;
  const verdict =
    caught === repeat ? "caught" : caught > 0 ? `caught in ${caught} of ${repeat}` : error ? "ERROR" : "MISSED";
  const seconds = Math.round((Date.now() - started) / 1000);
  rows.push({ name: p.name, verdict, caughtBy: failed, where, note: error ?? "" });
  console.error(`${p.name}: ${verdict} by ${where || "nothing"} (${failed.length} failing test(s), ${seconds} s)`);
}

const cell = (s) => s.replaceAll("|", "\\|");
const lines = [
  "| fault | verdict | caught by | tests that failed |",
  "| --- | --- | --- | --- |",
  ...rows.map((r) => {
    const shown = r.caughtBy.slice(0, 4).map(cell).join("<br>");
    const more = r.caughtBy.length > 4 ? `<br>... ${r.caughtBy.length - 4} more` : "";
    const note = r.note ? cell(r.note.slice(0, 120)) : "";
    const count = r.caughtBy.length ? ` (${r.caughtBy.length})` : "";
    return `| ${r.name} | ${r.verdict}${count} | ${r.where} | ${shown}${more}${!shown ? note : ""} |`;
  }),
];
console.log(lines.join("\n"));
if (values.markdown) writeFileSync(values.markdown, `${lines.join("\n")}\n`);
const missed = rows.filter((r) => r.verdict !== "caught").length;
if (repeat > 1) console.log(`(each fault run ${repeat} times; "caught" means caught every time)`);
if (values.bail) console.log("(--bail: each run stopped at its first failing test, so the lists are not complete)");
process.exit(unusable > 0 ? 2 : missed > 0 ? 1 : 0);
