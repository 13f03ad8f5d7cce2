/** Spawning the real `idempo` binary (from source, no build) and collecting what it printed. */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const packageDir = fileURLToPath(new URL("../..", import.meta.url));
const bin = fileURLToPath(new URL("../../bin/idempo.js", import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run `idempo ...args` in a child process with a clean colour environment
 * (no TTY, no NO_COLOR or FORCE_COLOR unless given in `env`). Killed after
 * `timeoutMs` so a hang fails the test instead of the suite.
 */
export function idempo(
  args: readonly string[],
  env: Record<string, string | undefined> = {},
  // Generous: only a command that hangs reaches it; a loaded machine starting tsx must not.
  timeoutMs = 120_000,
): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    NO_COLOR: undefined,
    FORCE_COLOR: undefined,
    DATABASE_URL: undefined,
    IDEMPO_PGLITE: undefined,
    ...env,
  };
  for (const [k, v] of Object.entries(childEnv)) if (v === undefined) delete childEnv[k];
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@idempo/source", bin, ...args], {
    cwd: packageDir,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Parse JSON Lines output. */
export function jsonLines<T = Record<string, unknown>>(text: string): T[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as T);
}

/** Run commands against the database at `url`, with at most `width` at a time (the machine has two cores). */
export async function runAll(
  url: string,
  commands: Record<string, { args: string[]; env?: Record<string, string> }>,
  width = 3,
) {
  const names = Object.keys(commands);
  const results: Record<string, CliResult> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        const c = commands[name] as { args: string[]; env?: Record<string, string> };
        results[name] = await idempo(c.args, { DATABASE_URL: url, ...c.env });
      }
    }),
  );
  return results;
}
