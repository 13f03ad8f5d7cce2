/**
 * The CLI as a user installs it: built JavaScript (dist), started by plain
 * `node bin/idempo.js` with no TypeScript loader in the process. Node 20
 * cannot import a `.ts` file by itself ("Unknown file extension"); `resume
 * --workflows x.ts` must load it through tsx all the same.
 */
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { beforeAll, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { jsonLines } from "./support/cli.ts";

const packageDir = fileURLToPath(new URL("..", import.meta.url));

const database = useClonedDatabase("idempo_cli_ts", {
  pool: 2,
  prepare: async (db) => {
    const engine = createEngine({ db, leaseMs: 200 });
    setFaultHook(engine, (point) => {
      if (point === "called:step:charge") throw new CrashSignal(point);
    });
    await expect(
      engine.runOnce(checkout, { tenantId: "acme", key: "order-1002", input: { amountCents: 4500 } }),
    ).rejects.toBeInstanceOf(CrashSignal);
    await new Promise((r) => setTimeout(r, 400));
  },
});

beforeAll(() => {
  // The build the package ships (core and cli, through project references).
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const build = spawnSync(process.execPath, [tsc, "-b", "tsconfig.json"], { cwd: packageDir, encoding: "utf8" });
  expect(build.stdout + build.stderr).toBe("");
  expect(build.status).toBe(0);
}, 600_000);

/** `node bin/idempo.js ...args`: no `--import tsx`, no source condition. */
function builtIdempo(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["bin/idempo.js", ...args], {
    cwd: packageDir,
    env: { ...process.env, NODE_OPTIONS: "", DATABASE_URL: database.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

it("the built CLI resumes runs with the workflows of a .ts module", async () => {
  const res = await builtIdempo(["resume", "--workflows", "test/fixtures/checkout-workflow.ts", "--json"]);
  expect(res.stderr).toBe("");
  expect(res.code).toBe(0);
  expect(jsonLines(res.stdout)).toEqual([
    {
      tenantId: "acme",
      key: "order-1002",
      workflow: "checkout",
      status: 201,
      outcome: "succeeded",
      was: "stale",
      result: "finished",
    },
  ]);
}, 600_000);
