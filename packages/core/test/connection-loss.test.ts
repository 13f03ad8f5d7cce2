/**
 * Fault kind "connection loss": a phase's backend terminated while the
 * phase waits must not kill the user's process. node-postgres reports such
 * a loss as an `'error'` event, and an `'error'` event nobody listens to is
 * an uncaught exception, so the scenario runs in a child process where a
 * crash is visible as an exit code. The run then raises
 * DatabaseUnavailableError, and the retry after the lease completes it once.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const CHILD = fileURLToPath(new URL("./fixtures/connection-loss-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

function runChild(mode: "wrapped" | "plain" | "bare") {
  const res = spawnSync(process.execPath, ["--import", "tsx", "--conditions=@idempo/source", CHILD, t.url, mode], {
    cwd: PACKAGE_DIR,
    encoding: "utf8",
    timeout: 300_000,
  });
  const last = res.stdout.trim().split("\n").pop() ?? "";
  return {
    code: res.status,
    signal: res.signal,
    stderr: res.stderr,
    result: last.startsWith("{") ? JSON.parse(last) : undefined,
  };
}

describe("connection loss in a phase never kills the process", () => {
  it("on a pool wrapped by withPreparedStatements", () => {
    const run = runChild("wrapped");
    expect(run.stderr).not.toContain("Unhandled 'error' event");
    expect(run.code).toBe(0);
    expect(run.result).toEqual({
      firstError: "DatabaseUnavailableError",
      retried: { status: 201, replayed: false },
      orders: 1,
    });
  }, 360_000);

  it("on a plain pool with the two listeners the README shows", () => {
    const run = runChild("plain");
    expect(run.stderr).not.toContain("Unhandled 'error' event");
    expect(run.code).toBe(0);
    expect(run.result).toEqual({
      firstError: "DatabaseUnavailableError",
      retried: { status: 201, replayed: false },
      orders: 1,
    });
  }, 360_000);

  // The control: without any listener the same scenario does crash, so the two above can fail.
  it("crashes a bare pool with no listener (what the wrapper and the README lines prevent)", () => {
    const run = runChild("bare");
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/terminat/i);
    expect(run.result).toBeUndefined();
  }, 360_000);
});
