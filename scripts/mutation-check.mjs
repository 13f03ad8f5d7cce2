/**
 * The `--check` mode of scripts/mutate.mjs (the cheap upkeep check CI runs):
 * each fault patch still applies to the source as it is, the core still
 * type-checks with it in, and a patch that changes a migration still
 * migrates. No test runs.
 *
 * The patches go into a scratch copy of packages/core and migrations/ under
 * the system's temporary folder (node_modules linked, not copied), never into
 * the checkout: nothing else, a test run or the pack check running beside
 * it, can ever see a fault. The copy is taken from the working tree, so
 * uncommitted changes count as they do for the suites.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdtempSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/**
 * Migrate an empty in-memory PGlite database with the migrations as they are
 * on disk in the tree `coreDir` belongs to (the engine's own runner, from the
 * TypeScript source); returns the error text, or undefined when every
 * migration applied.
 */
export function migrationError(coreDir) {
  const script = `
    import { PGlite } from "@electric-sql/pglite";
    import { Kysely } from "kysely";
    import { PGliteDialect } from "kysely-pglite-dialect";
    import { createEngine } from "./src/index.ts";
    const db = new Kysely({ dialect: new PGliteDialect(await PGlite.create()) });
    try { await createEngine({ db }).migrate(); }
    catch (error) { console.error("migration failed: " + error.message); process.exitCode = 1; }
    finally { await db.destroy(); }`;
  const run = spawnSync(
    process.execPath,
    ["--import", "tsx", "--conditions=@idempo/source", "--input-type=module", "-e", script],
    { cwd: coreDir, encoding: "utf8" },
  );
  if (run.status === 0) return undefined;
  const said = /^migration failed: (.*)$/m.exec(run.stderr)?.[1];
  // A crash before the runner answered: the first line naming an error, not node's closing version line.
  const crash = run.stderr.split("\n").find((l) => /error/i.test(l)) ?? run.stderr.trim().split("\n")[0];
  return said ?? `${(crash || "").trim()} (exit ${run.status ?? run.signal})`;
}

/** What the patches touch and what type-checking and migrating the core needs, copied from `root`. */
const COPIED = [
  "tsconfig.base.json",
  "migrations",
  "packages/core/src",
  "packages/core/package.json",
  "packages/core/tsconfig.json",
];
const LINKED = ["node_modules", "packages/core/node_modules"];

/**
 * Check every patch of `patches` (as mutate.mjs reads them: `name`, `text`,
 * `files`, `tests`) against the tree at `root`, printing one line each;
 * returns how many are unusable (stale, naming missing test files, not
 * type-checking or not migrating).
 */
export function checkPatches(root, patches) {
  const scratch = mkdtempSync(join(tmpdir(), "idempo-mutate-check-"));
  for (const path of COPIED) cpSync(join(root, path), join(scratch, path), { recursive: true });
  for (const path of LINKED) symlinkSync(join(root, path), join(scratch, path), "dir");
  const coreDir = join(scratch, "packages", "core");
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  // Plain patch mode: no repository above the scratch folder may take part.
  const gitEnv = { ...process.env, GIT_CEILING_DIRECTORIES: dirname(scratch) };
  const apply = (p, ...flags) =>
    spawnSync("git", ["apply", ...flags, "-"], { cwd: scratch, input: p.text, encoding: "utf8", env: gitEnv });
  /** Put back the files `p` touched as they are at `root`. */
  const reset = (p) => {
    for (const file of p.files) {
      if (existsSync(join(root, file))) copyFileSync(join(root, file), join(scratch, file));
      else rmSync(join(scratch, file), { force: true });
    }
  };

  let bad = 0;
  try {
    for (const p of patches) {
      const check = apply(p, "--check");
      const missing = p.tests.filter((t) => !existsSync(join(root, "packages", "core", t)));
      if (check.status !== 0) {
        bad++;
        console.log(`${p.name}: STALE (${check.stderr.trim().split("\n")[0]})`);
        continue;
      }
      if (missing.length > 0) {
        bad++;
        console.log(`${p.name}: NAMES MISSING TEST FILES (${missing.join(", ")})`);
        continue;
      }
      try {
        const applied = apply(p);
        if (applied.status !== 0) throw new Error(`git apply failed: ${applied.stderr}`);
        const touchesSource = p.files.some((f) => f.startsWith("packages/"));
        const touchesMigrations = p.files.some((f) => f.startsWith("migrations/"));
        // Incremental: the first patch checks the whole core, the others only what changed since.
        const typed = touchesSource
          ? spawnSync(process.execPath, [tsc, "--noEmit", "-p", "tsconfig.json"], { cwd: coreDir, encoding: "utf8" })
          : { status: 0 };
        const migrated = typed.status === 0 && touchesMigrations ? migrationError(coreDir) : undefined;
        if (typed.status !== 0) {
          bad++;
          console.log(`${p.name}: DOES NOT TYPE-CHECK\n${typed.stdout.trim().split("\n").slice(0, 5).join("\n")}`);
        } else if (migrated) {
          bad++;
          console.log(`${p.name}: DOES NOT MIGRATE (${migrated})`);
        } else {
          const passed = [touchesSource && "type-checks", touchesMigrations && "migrates"].filter(Boolean);
          console.log(`${p.name}: applies, ${passed.join(" and ")}`);
        }
      } finally {
        reset(p);
      }
    }
  } finally {
    // The links first, so that removing the copy can never reach into the real node_modules.
    for (const path of LINKED) unlinkSync(join(scratch, path));
    rmSync(scratch, { recursive: true, force: true });
  }
  return bad;
}
