/**
 * One spin check: generate the verifier for a configuration of the model,
 * compile it, run it, and read its report. Each check works in its own
 * temporary directory, so checks can run side by side.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The model file, next to this package's sources. */
const MODEL = join(dirname(fileURLToPath(import.meta.url)), "..", "model", "idempo.pml");

export interface CheckSpec {
  /** Preprocessor switches for spin (scenario, sizes, variant), e.g. `["OPERATOR", "CRASHES=2"]`. */
  readonly defines: readonly string[];
  /** Safety: assertions and invalid end states. Liveness: acceptance cycles of the LTL property under weak fairness. */
  readonly mode: "safety" | "liveness";
}

interface Violation {
  readonly kind: "assertion" | "acceptance cycle" | "invalid end state" | "other";
  /** For an assertion, the ghost bit that failed (a property name). */
  readonly property: string | null;
}

export interface CheckReport {
  readonly errors: number;
  readonly violation: Violation | null;
  readonly statesStored: number;
  readonly transitions: number;
  readonly depth: number;
  readonly stateVectorBytes: number;
  /** Seconds pan reported for the search (not compilation). */
  readonly seconds: number;
  /** False when the search was cut short (depth limit, memory); a pass then proves nothing. */
  readonly complete: boolean;
  readonly output: string;
}

function num(output: string, re: RegExp): number {
  const m = re.exec(output);
  return m?.[1] === undefined ? Number.NaN : Number(m[1]);
}

/** Read pan's report. */
export function parsePan(output: string): CheckReport {
  const errors = num(output, /errors: (\d+)/);
  let violation: Violation | null = null;
  const assertion = /assertion violated \(?([A-Za-z_]+)\)?/.exec(output);
  if (assertion) violation = { kind: "assertion", property: assertion[1] ?? null };
  else if (/pan:\d+: acceptance cycle/.test(output)) violation = { kind: "acceptance cycle", property: null };
  else if (/pan:\d+: invalid end state/.test(output)) violation = { kind: "invalid end state", property: null };
  else if (errors > 0) violation = { kind: "other", property: null };
  const truncated = /max search depth too small|out of memory|search not completed/i.test(output);
  return {
    errors,
    violation,
    statesStored: num(output, /([\d.e+]+) states, stored/),
    transitions: num(output, /([\d.e+]+) transitions \(= stored\+matched\)/),
    depth: num(output, /depth reached (\d+)/),
    stateVectorBytes: num(output, /State-vector (\d+) byte/),
    seconds: num(output, /elapsed time ([\d.e+]+) seconds/),
    complete: !Number.isNaN(errors) && !truncated,
    output,
  };
}

/** Run one check. Rejects when spin, gcc or pan cannot run at all. */
export async function check(spec: CheckSpec): Promise<CheckReport> {
  const dir = await mkdtemp(join(tmpdir(), "idempo-model-"));
  try {
    const live = spec.mode === "liveness";
    const defs = [...spec.defines, ...(live ? ["LIVENESS"] : [])].map((d) => `-D${d}`);
    await run("spin", [...defs, "-a", MODEL], { cwd: dir });
    // COLLAPSE: exhaustive, with compressed state storage. NFAIR: room for every process under -f.
    // A safety search takes a second or two, less than gcc -O2 takes to compile pan (about 3 s): -O0
    // for those; the longer liveness searches (up to about ten times slower at -O0) get -O2.
    const cc = [live ? "-O2" : "-O0", "-DCOLLAPSE", "-DMEMLIM=2048", ...(live ? ["-DNFAIR=3"] : ["-DSAFETY"])];
    await run("gcc", [...cc, "-o", "pan", "pan.c"], { cwd: dir });
    const args = ["-m1000000", ...(live ? ["-a", "-f"] : [])];
    // pan exits 0 also when it found an error; the report says which.
    const { stdout } = await run(join(dir, "pan"), args, { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    return parsePan(stdout);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
