// Shared set-up for `npm test` and `npm run demo`: a fresh clone with only
// Node and npm gets the pinned pnpm and the locked dependencies.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Environment for every child: no turbo telemetry (and no DNS lookups for it). */
export const env = { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" };

export function log(message) {
  console.log(`\n== ${message}`);
}

/** Run a command in the repository root with inherited output; returns its exit code. */
export function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, env, stdio: "inherit", ...options });
  if (result.error) {
    console.error(`${command}: ${result.error.message}`);
    return 127;
  }
  return result.status ?? 1;
}

/** Path of a binary installed by pnpm in the root node_modules. */
export function bin(name) {
  return join(root, "node_modules", ".bin", name);
}

function wantedPnpm() {
  const { packageManager } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const match = /^pnpm@(\d+\.\d+\.\d+)$/.exec(packageManager ?? "");
  if (!match?.[1]) throw new Error(`package.json: expected "packageManager": "pnpm@x.y.z", got ${packageManager}`);
  return match[1];
}

function pnpmVersion() {
  const result = spawnSync("pnpm", ["--version"], { cwd: root, env, encoding: "utf8" });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

function prependPath(dir) {
  env.PATH = `${dir}${delimiter}${env.PATH ?? ""}`;
}

/**
 * Make `pnpm` on PATH the version pinned in package.json. Corepack cannot be
 * used: it insists on registry signatures, which not every registry serves.
 * Installs globally with npm; when the global prefix is not writable, into
 * `.tools/` in the checkout instead.
 */
export function ensurePnpm() {
  const wanted = wantedPnpm();
  const local = join(root, ".tools");
  if (pnpmVersion() === wanted) return;
  prependPath(join(local, "bin")); // from an earlier fallback install
  const found = pnpmVersion();
  if (found === wanted) return;
  log(`pnpm ${wanted} needed (found ${found ?? "none"}): npm install -g -E pnpm@${wanted}`);
  const npmArgs = ["install", "-g", "-E", `pnpm@${wanted}`, "--no-audit", "--no-fund"];
  if (run("npm", npmArgs) === 0) {
    // The global bin directory may not be on PATH (or may come after another pnpm).
    const prefix = spawnSync("npm", ["prefix", "-g"], { env, encoding: "utf8" }).stdout?.trim();
    if (prefix) prependPath(join(prefix, "bin"));
  } else {
    log(`global install failed; installing pnpm ${wanted} into ${local}`);
    if (run("npm", [...npmArgs, "--prefix", local]) !== 0) throw new Error(`could not install pnpm@${wanted}`);
    prependPath(join(local, "bin"));
  }
  const now = pnpmVersion();
  if (now !== wanted)
    throw new Error(`pnpm ${wanted} installed, but \`pnpm --version\` still says ${now ?? "nothing"}`);
}

/** pnpm at the pinned version, then the locked dependencies; exits on failure. */
export function setUp() {
  try {
    ensurePnpm();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
  log("pnpm install --frozen-lockfile");
  const status = run("pnpm", ["install", "--frozen-lockfile"]);
  if (status !== 0) process.exit(status);
}
