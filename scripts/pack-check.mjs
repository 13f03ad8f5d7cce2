#!/usr/bin/env node
// `pnpm pack:check`: do the packages work for someone who installs them?
//
// Packs every publishable package (each non-private package under packages/;
// `pnpm pack` runs its prepack build and applies publishConfig), checks what
// each tarball holds against its manifest, then installs the tarballs with
// npm into a scratch project outside the workspace, next to registry
// packages only (no workspace links, no source condition), and there:
// type-checks a consumer with `strict` under moduleResolution node16 and
// bundler; runs migrate and the checkout workflow (phase, step, phase) on pg
// (DATABASE_URL) and on PGlite; terminates a phase's backend under the
// README's two pool setups (the process must live, the run must raise
// DatabaseUnavailableError and complete once on retry); runs the installed
// `idempo` binary; mounts @idempo/http on Express, Fastify and Hono and calls its Fetch handler. The consumer's sources are in
// scripts/pack-check/app/. Then a second consumer with Drizzle and no Kysely
// (scripts/pack-check/drizzle-app/): only @idempo/core's tarball, drizzle-orm
// and pg; `npm ls kysely` must find nothing, core's declarations must compile
// with skipLibCheck off, and a checkout whose phases write with Drizzle runs,
// crashes, is taken over and replays, on pg and on PGlite; and so does
// examples/checkout-drizzle, its sources built against the packed tarball.
//
// A failing stage does not stop the independent ones after it; the exit code
// is 1 if any failed. `--keep` leaves the scratch folder for a look.
import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const keep = process.argv.includes("--keep");
const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;
/** What the consumer brings from the registry; versions are the ones the workspace pins and tests with. */
const REGISTRY = [
  "kysely",
  "zod",
  "pg",
  "@electric-sql/pglite",
  "kysely-pglite-dialect",
  "express",
  "fastify",
  "hono",
  "amqplib",
  "@nats-io/transport-node",
  "@nats-io/jetstream",
  "typescript",
  "@types/node",
  "@types/pg",
  "@types/express",
];
/** What the Drizzle-only consumer brings from the registry: no Kysely. */
const DRIZZLE_REGISTRY = ["drizzle-orm", "zod", "pg", "@electric-sql/pglite", "typescript", "@types/node", "@types/pg"];
/** Libraries the user brings: exactly one copy of each in the installed tree. */
const SINGLE_COPY = ["kysely", "zod", "pg", "@idempo/core"];

const results = [];
const log = (message) => console.log(`\n== pack-check: ${message}`);

/** Run one stage; an error marks it failed and the run goes on. */
async function stage(name, body) {
  log(name);
  const started = Date.now();
  let ok = true;
  try {
    await body();
  } catch (error) {
    ok = false;
    console.error(`FAILED ${name}: ${error instanceof Error ? error.message : String(error)}`);
  }
  results.push({ name, ok, seconds: ((Date.now() - started) / 1000).toFixed(1) });
  return ok;
}

/** Run a command; throws with its output on a non-zero exit. `quiet` keeps stdout unless it fails. */
function run(command, args, { cwd, env, quiet = false, expectSignal } = {}) {
  const child = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 64 * 1024 * 1024,
  });
  const output = `${child.stdout ?? ""}${child.stderr ?? ""}`;
  const failed = expectSignal ? child.signal !== expectSignal : child.status !== 0;
  if (failed || !quiet) process.stdout.write(output);
  if (child.error) throw child.error;
  if (failed) {
    const how = child.signal ? `signal ${child.signal}` : `exit ${child.status}`;
    throw new Error(
      `${command} ${args.join(" ")} ended with ${how}${expectSignal ? ` (expected ${expectSignal})` : ""}`,
    );
  }
  return child.stdout;
}

/** Like `run`, without blocking, so several commands can run at once; their output is printed whole. */
function runAsync(command, args, { cwd, env }) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (output += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (output += d));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      process.stdout.write(output);
      if (code === 0) resolvePromise();
      else reject(new Error(`${command} ${args.join(" ")} ended with ${signal ? `signal ${signal}` : `exit ${code}`}`));
    });
  });
}

function readJson(path) {
  return JSON.parse(readFileSync(path, "utf8"));
}

function publishablePackages() {
  const dir = join(root, "packages");
  return readdirSync(dir)
    .map((name) => join(dir, name))
    .filter((pkg) => existsSync(join(pkg, "package.json")))
    .map((pkg) => ({ dir: pkg, manifest: readJson(join(pkg, "package.json")) }))
    .filter(({ manifest }) => manifest.private !== true);
}

/** Exact versions pinned anywhere in the workspace's manifests. */
function pinnedVersions() {
  const manifests = [join(root, "package.json")];
  for (const group of ["packages", "examples"]) {
    for (const name of readdirSync(join(root, group))) manifests.push(join(root, group, name, "package.json"));
  }
  const versions = new Map();
  for (const path of manifests.filter((p) => existsSync(p))) {
    const manifest = readJson(path);
    for (const field of ["dependencies", "devDependencies", "optionalDependencies"]) {
      for (const [name, spec] of Object.entries(manifest[field] ?? {})) {
        if (/^\d+\.\d+\.\d+$/.test(spec) && !versions.has(name)) versions.set(name, spec);
      }
    }
  }
  return versions;
}

/** Every file target of an `exports` value, with the conditions that lead to it. */
function exportTargets(value, path = []) {
  if (typeof value === "string") return [{ target: value, conditions: path }];
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([key, inner]) => exportTargets(inner, [...path, key]));
}

/** What a packed tarball holds must be what its manifest promises. */
function checkTarball(tarball, { migrations }) {
  const files = new Set(
    run("tar", ["-tzf", tarball], { quiet: true })
      .split("\n")
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, "")),
  );
  const manifest = JSON.parse(run("tar", ["-xzOf", tarball, "package/package.json"], { quiet: true }));
  const problems = [];
  const has = (target) => files.has(target.replace(/^\.\//, ""));
  for (const { target, conditions } of exportTargets(manifest.exports)) {
    if (conditions.includes("@idempo/source")) problems.push(`exports keeps the source condition (${target})`);
    else if (!has(target)) problems.push(`exports[${conditions.join("][")}] points at ${target}, not in the tarball`);
  }
  for (const target of Object.values(typeof manifest.bin === "string" ? { bin: manifest.bin } : (manifest.bin ?? {}))) {
    if (!has(target)) problems.push(`bin ${target} is not in the tarball`);
  }
  for (const field of ["dependencies", "peerDependencies", "optionalDependencies"]) {
    for (const [name, spec] of Object.entries(manifest[field] ?? {})) {
      if (String(spec).startsWith("workspace:")) problems.push(`${field}.${name} is still ${spec}`);
    }
  }
  if (manifest.name === "@idempo/core") {
    const packed = [...files].filter((f) => f.startsWith("dist/migrations/")).map((f) => f.slice(16));
    const missing = migrations.filter((m) => !packed.includes(m));
    if (missing.length > 0) problems.push(`migrations missing from dist/migrations: ${missing.join(", ")}`);
    // The runner applies what it finds there; the current schema file (migrations/current/) must not be among it.
    const extra = packed.filter((m) => m !== "" && !migrations.includes(m));
    if (extra.length > 0) problems.push(`dist/migrations holds more than the migrations: ${extra.join(", ")}`);
  }
  if (problems.length > 0) throw new Error(`${manifest.name}:\n  ${problems.join("\n  ")}`);
  console.log(`${manifest.name}@${manifest.version}: ${files.size} files; exports, bin and dependencies check out`);
}

/** A module importing every entry of every packed package's `exports`, for tsc and for Node. */
function everyExport(tarballs) {
  const specifiers = tarballs.flatMap((tarball) => {
    const manifest = JSON.parse(run("tar", ["-xzOf", tarball, "package/package.json"], { quiet: true }));
    return Object.keys(manifest.exports ?? { ".": null }).map((sub) => `${manifest.name}${sub.slice(1)}`);
  });
  return [
    "// Written by scripts/pack-check.mjs: every export of every publishable package.",
    ...specifiers.map((spec, i) => `import * as m${i} from ${JSON.stringify(spec)};`),
    "",
    `const modules: Record<string, object> = { ${specifiers.map((spec, i) => `${JSON.stringify(spec)}: m${i}`).join(", ")} };`,
    'for (const [name, module] of Object.entries(modules)) console.log(name, "->", Object.keys(module).length, "runtime exports");',
    "",
  ].join("\n");
}

/** Where each named package is installed in the tree (every nested copy). */
function installedCopies(nodeModules, names, found = new Map()) {
  if (!existsSync(nodeModules)) return found;
  for (const entry of readdirSync(nodeModules)) {
    if (entry.startsWith(".")) continue;
    const scoped = entry.startsWith("@");
    const dirs = scoped ? readdirSync(join(nodeModules, entry)).map((e) => `${entry}/${e}`) : [entry];
    for (const name of dirs) {
      const dir = join(nodeModules, name);
      if (names.includes(name)) found.set(name, [...(found.get(name) ?? []), dir]);
      installedCopies(join(dir, "node_modules"), names, found);
    }
  }
  return found;
}

function pgClient(url) {
  const pg = createRequire(join(root, "packages/testkit/package.json"))("pg");
  return new pg.Client({ connectionString: url });
}

async function adminQuery(url, text) {
  const client = pgClient(url);
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

function idempoBin(app, args, env) {
  // The way docs/cli.md runs it in a project that installed @idempo/cli.
  return run("npx", ["--no", "idempo", ...args], { cwd: app, env, quiet: true });
}

/**
 * Install @idempo/core's tarball with Drizzle and pg only (no Kysely, no
 * other idempo package), check that nothing brought Kysely in, type-check
 * core's declarations with skipLibCheck off, build and run the consumer.
 */
function drizzleConsumer(dir, coreTarball, env, exampleEnv) {
  const versions = pinnedVersions();
  const registry = Object.fromEntries(
    DRIZZLE_REGISTRY.map((name) => {
      const version = versions.get(name);
      if (!version) throw new Error(`no exact version of ${name} is pinned in the workspace`);
      return [name, version];
    }),
  );
  mkdirSync(dir, { recursive: true });
  cpSync(join(root, "scripts/pack-check/drizzle-app"), dir, { recursive: true });
  cpSync(join(root, "examples/checkout-drizzle/src"), join(dir, "example"), { recursive: true });
  const manifest = {
    name: "pack-check-drizzle-app",
    private: true,
    type: "module",
    dependencies: { "@idempo/core": `file:${coreTarball}`, ...registry },
  };
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], { cwd: dir });
  const kysely = installedCopies(join(dir, "node_modules"), ["kysely"]).get("kysely") ?? [];
  if (kysely.length > 0) throw new Error(`kysely is installed in the Drizzle-only consumer: ${kysely.join(", ")}`);
  const ls = spawnSync("npm", ["ls", "kysely", "--all", "--parseable"], { cwd: dir, encoding: "utf8" });
  if (ls.stdout.trim() !== "") throw new Error(`npm ls kysely found: ${ls.stdout.trim()}`);
  console.log("npm ls kysely: nothing installed");
  const tsc = (project) => run("node", ["node_modules/typescript/bin/tsc", "-p", project], { cwd: dir });
  tsc("tsconfig.declarations.json");
  console.log("@idempo/core's declarations compile without kysely, skipLibCheck off");
  tsc("tsconfig.json");
  run("node", ["out/main.js", "pglite"], { cwd: dir });
  run("node", ["out/main.js", "pg"], { cwd: dir, env });
  // The example's story, on PGlite and on a database of its own (its orders table is not the other consumer's).
  run("node", ["out/example/main.js"], { cwd: dir, env: { DATABASE_URL: "" } });
  run("node", ["out/example/main.js"], { cwd: dir, env: exampleEnv });
}

async function main() {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) throw new Error("DATABASE_URL must point at a PostgreSQL server (.ci/run exports it)");
  const packages = publishablePackages();
  const migrations = readdirSync(join(root, "migrations"))
    .filter((f) => MIGRATION_FILE.test(f))
    .sort();
  const scratch = mkdtempSync(join(tmpdir(), "idempo-pack-"));
  const tarballs = join(scratch, "tarballs");
  const app = join(scratch, "app");
  const database = `idempo_pack_${process.pid}_${Date.now().toString(36)}`;
  const urlOf = (name) => {
    const u = new URL(serverUrl);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const dbUrl = urlOf(database);
  console.log(`publishable: ${packages.map((p) => p.manifest.name).join(", ")}; scratch: ${scratch}`);

  try {
    const packed = new Map();
    const packedOk = await stage("pack every publishable package", () => {
      mkdirSync(tarballs, { recursive: true });
      for (const { dir, manifest } of packages) {
        run("pnpm", ["pack", "--pack-destination", tarballs], { cwd: dir, quiet: true });
        const file = join(tarballs, `${manifest.name.replace(/^@/, "").replace("/", "-")}-${manifest.version}.tgz`);
        if (!existsSync(file)) throw new Error(`pnpm pack left no ${file}`);
        packed.set(manifest.name, file);
        console.log(`packed ${manifest.name} -> ${file}`);
      }
    });
    if (!packedOk) return;

    await stage("tarball contents match the manifests", () => {
      const problems = [];
      for (const file of packed.values()) {
        try {
          checkTarball(file, { migrations });
        } catch (error) {
          problems.push(error.message);
        }
      }
      if (problems.length > 0) throw new Error(problems.join("\n"));
    });

    const installedOk = await stage("npm install the tarballs into a project outside the workspace", () => {
      const versions = pinnedVersions();
      const registry = Object.fromEntries(
        REGISTRY.map((name) => {
          const version = versions.get(name);
          if (!version) throw new Error(`no exact version of ${name} is pinned in the workspace`);
          return [name, version];
        }),
      );
      const local = Object.fromEntries([...packed].map(([name, file]) => [name, `file:${file}`]));
      mkdirSync(app, { recursive: true });
      cpSync(join(root, "scripts/pack-check/app"), app, { recursive: true });
      const manifest = {
        name: "pack-check-app",
        private: true,
        type: "module",
        dependencies: { ...local, ...registry },
        // kysely-pglite-dialect 1.3.1 declares PGlite ^0.2-^0.4 but works with 0.5 (as in the
        // workspace); an application on PGlite 0.5 needs this same override (see the README).
        overrides: { "kysely-pglite-dialect": { "@electric-sql/pglite": "$@electric-sql/pglite" } },
      };
      writeFileSync(join(app, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
      run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], { cwd: app });
      const single = [...new Set([...SINGLE_COPY, ...packed.keys()])];
      const copies = installedCopies(join(app, "node_modules"), single);
      for (const name of single) {
        const where = copies.get(name) ?? [];
        if (where.length !== 1) throw new Error(`${where.length} copies of ${name} installed: ${where.join(", ")}`);
        if (lstatSync(where[0]).isSymbolicLink()) throw new Error(`${name} is a link, not an installed package`);
      }
      console.log(`one copy each of ${single.join(", ")}`);
    });
    if (!installedOk) return;

    writeFileSync(join(app, "exports.ts"), everyExport([...packed.values()]));
    // Three independent compilations, side by side (the node16 one also writes out/ for the stages below).
    const tsc = (project) => runAsync("node", ["node_modules/typescript/bin/tsc", "-p", project], { cwd: app });
    await Promise.all([
      stage("type-check the consumer, strict, moduleResolution node16 (and build it)", () =>
        tsc("tsconfig.node16.json"),
      ),
      stage("type-check the consumer, strict, moduleResolution bundler", () => tsc("tsconfig.bundler.json")),
      stage("type-check every export's declarations (skipLibCheck off)", () => tsc("tsconfig.declarations.json")),
    ]);
    await stage("Node ESM imports every export", () => {
      run("node", ["out/exports.js"], { cwd: app });
    });

    await stage("migrate and run the checkout on PGlite", () => {
      run("node", ["out/main.js", "pglite"], { cwd: app });
    });

    await adminQuery(serverUrl, `CREATE DATABASE "${database}"`);
    const env = { DATABASE_URL: dbUrl };
    await stage("migrate and run the checkout on pg (withPreparedStatements pool)", () => {
      run("node", ["out/main.js", "pg"], { cwd: app, env });
    });

    // Each pool setup in its own process: an unhandled 'error' event is a non-zero exit there.
    await stage("a phase's backend terminated: process alive, DatabaseUnavailableError, retry once", async () => {
      const setups = ["wrapped", "plain"];
      const outcomes = await Promise.allSettled(
        setups.map((setup) => runAsync("node", ["out/connection-loss.js", setup], { cwd: app, env })),
      );
      const failed = outcomes.flatMap((o, i) => (o.status === "rejected" ? [`${setups[i]}: ${o.reason.message}`] : []));
      if (failed.length > 0) throw new Error(failed.join("; "));
    });

    await stage("@idempo/http on Express, Fastify, Hono and as a Fetch handler: a key and its replay", () => {
      run("node", ["out/http.js"], { cwd: app, env });
    });

    await stage("the installed idempo binary: migrate, migrate --print, keys stuck --json", async () => {
      const expected = migrations.map((m) => m.replace(/\.sql$/, ""));
      const fresh = JSON.parse(idempoBin(app, ["migrate", "--json", "--schema", "pack_cli"], env));
      if (JSON.stringify(fresh.applied) !== JSON.stringify(expected)) {
        throw new Error(`migrate on a new schema applied ${JSON.stringify(fresh.applied)}, expected ${expected}`);
      }
      const again = JSON.parse(idempoBin(app, ["migrate", "--json", "--schema", "pack_cli"], env));
      if (again.applied?.length !== 0) throw new Error(`migrate on a migrated schema: ${JSON.stringify(again)}`);
      const script = idempoBin(app, ["migrate", "--print", "--schema", "pack_printed"], env);
      if (!script.includes(`INSERT INTO "pack_printed".schema_migrations (version, name) VALUES (1, '0001_runs');`)) {
        throw new Error(`migrate --print did not print the pending SQL:\n${script}`);
      }
      console.log(`idempo migrate: ${fresh.applied.length} applied to a new schema, then up to date; --print ok`);

      // A checkout whose process dies in its charge step: once its lease runs out it is stuck.
      run("node", ["out/main.js", "crash"], { cwd: app, env, expectSignal: "SIGKILL" });
      const deadline = Date.now() + 60_000;
      for (;;) {
        const lines = idempoBin(app, ["keys", "stuck", "--json"], env).split("\n").filter(Boolean);
        const stuck = lines
          .map((line) => JSON.parse(line))
          .find((k) => k.tenantId === "acme" && k.key === "order-stuck");
        if (stuck) {
          console.log(`idempo keys stuck --json lists ${stuck.tenantId}/${stuck.key} (${stuck.stoppedAt})`);
          break;
        }
        if (Date.now() > deadline) throw new Error(`keys stuck --json never listed order-stuck: ${lines.join("\n")}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    });

    await adminQuery(serverUrl, `CREATE DATABASE "${database}_drizzle"`);
    const exampleEnv = { DATABASE_URL: urlOf(`${database}_drizzle`) };
    await stage(
      "a Drizzle-only consumer: no Kysely installed, core's declarations compile, the Drizzle checkouts run",
      () => drizzleConsumer(join(scratch, "drizzle-app"), packed.get("@idempo/core"), env, exampleEnv),
    );
  } finally {
    for (const name of [database, `${database}_drizzle`]) {
      await adminQuery(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch((error) =>
        console.error(`could not drop ${name}: ${error.message}`),
      );
    }
    if (keep) console.log(`kept ${scratch}`);
    else rmSync(scratch, { recursive: true, force: true });
  }
}

const started = Date.now();
try {
  await main();
} catch (error) {
  results.push({ name: "pack-check", ok: false, seconds: "-" });
  console.error(`FAILED pack-check: ${error instanceof Error ? error.message : String(error)}`);
}
log(`summary (${((Date.now() - started) / 1000).toFixed(0)}s)`);
for (const { name, ok, seconds } of results) console.log(`${ok ? "ok    " : "FAILED"} ${name} (${seconds}s)`);
process.exit(results.length > 0 && results.every((r) => r.ok) ? 0 : 1);
