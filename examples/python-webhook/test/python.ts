/**
 * The Python the example runs with: the first interpreter that can import
 * psycopg 3, among `$PYTHON`, `python3` on the PATH (a pyenv shim, say) and
 * Debian's `/usr/bin/python3` (where `apt-get install python3-psycopg`
 * puts it). None: the Python tests are skipped, and say why.
 */
import { spawnSync } from "node:child_process";

const CANDIDATES = [process.env.PYTHON, "python3", "/usr/bin/python3"].filter(
  (c): c is string => typeof c === "string" && c.length > 0,
);

function findPython(): string | null {
  for (const candidate of CANDIDATES) {
    const probe = spawnSync(candidate, ["-c", "import psycopg"], { stdio: "ignore", timeout: 30_000 });
    if (probe.status === 0) return candidate;
  }
  return null;
}

/** The interpreter to run the example with, or null when none has psycopg. */
export const python = findPython();

/** Why the Python tests are skipped, when they are. */
export const noPythonReason =
  `no Python with psycopg 3 (tried ${CANDIDATES.join(", ")}): ` +
  "install it (Debian: apt-get install python3-psycopg; elsewhere: pip install psycopg) or set PYTHON";
