/**
 * The packed package carries its migrations: the build copies the top-level
 * migrations/ folder (the one source) into dist/migrations, and the runner
 * of a built package reads exactly that copy, never a `migrations/` folder
 * of the application around it. The pack-and-install check
 * (scripts/pack-check.mjs) migrates from a real installed tarball.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { migrationsDir } from "../src/store/migrate.ts";

const here = dirname(fileURLToPath(import.meta.url));
const topLevel = join(here, "../../../migrations");
const scratch = mkdtempSync(join(tmpdir(), "idempo-packaged-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const sqlFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort();

describe("copy-migrations (the build step)", () => {
  it("copies every top-level migration byte for byte and drops files that are no longer there", () => {
    const dest = join(scratch, "copied/dist/migrations");
    mkdirSync(dest, { recursive: true });
    writeFileSync(join(dest, "0999_removed_since.sql"), "SELECT 1;\n");
    execFileSync(process.execPath, [join(here, "../scripts/copy-migrations.mjs"), dest], { stdio: "pipe" });
    expect(sqlFiles(dest)).toEqual(sqlFiles(topLevel));
    expect(sqlFiles(dest).length).toBeGreaterThan(0);
    // Only the numbered files: the current schema (migrations/current/) is for readers and does not ship.
    expect(readdirSync(dest).sort()).toEqual(sqlFiles(topLevel));
    for (const file of sqlFiles(topLevel)) {
      expect(readFileSync(join(dest, file), "utf8")).toBe(readFileSync(join(topLevel, file), "utf8"));
    }
  });
});

describe("migrationsDir", () => {
  it("reads the top-level folder when running from the TypeScript source", () => {
    const source = pathToFileURL(join(here, "../src/store/migrate.ts")).href;
    expect(migrationsDir(source)).toBe(topLevel);
  });

  it("reads dist/migrations beside a built runner", () => {
    const pkg = join(scratch, "built");
    mkdirSync(join(pkg, "dist/migrations"), { recursive: true });
    const runner = pathToFileURL(join(pkg, "dist/store/migrate.js")).href;
    expect(migrationsDir(runner)).toBe(join(pkg, "dist/migrations"));
  });

  it("a built package without its copy fails with the path it looked in, not some other migrations/ folder", () => {
    // An application's own migrations/ at the project root must never be taken for idempo's.
    const app = join(scratch, "app");
    mkdirSync(join(app, "migrations"), { recursive: true });
    writeFileSync(join(app, "migrations/0001_app.sql"), "CREATE TABLE app (id int);\n");
    const runner = pathToFileURL(join(app, "node_modules/@idempo/core/dist/store/migrate.js")).href;
    expect(() => migrationsDir(runner)).toThrow(
      `idempo migrations not found in ${join(app, "node_modules/@idempo/core/dist/migrations")}`,
    );
  });
});
