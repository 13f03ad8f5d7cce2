/** Starting `idempo console` as a real child process and reading the address (and token) it prints. */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const packageDir = fileURLToPath(new URL("../..", import.meta.url));
const bin = fileURLToPath(new URL("../../bin/idempo.js", import.meta.url));

/** A console child process. */
export interface ConsoleProcess {
  readonly url: string;
  /** The `?token=` address it printed: opening it logs a browser in. */
  readonly tokenUrl: string;
  stop(): Promise<void>;
}

/** Start `idempo console --port 0 ...extra` on `databaseUrl`; resolves once it printed its address. */
export function startConsoleProcess(databaseUrl: string, extra: readonly string[] = []): Promise<ConsoleProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--import", "tsx", "--conditions=@idempo/source", bin, "console", "--port", "0", ...extra],
    { cwd: packageDir, env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`idempo console exited with ${code}: ${stderr}`)));
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      const url = /idempo console on (http:\/\/\S+)/.exec(stdout)?.[1];
      if (!url || !stdout.includes("Ctrl-C")) return;
      const tokenUrl = /open (http:\/\/\S+\?token=\S+)/.exec(stdout)?.[1];
      if (tokenUrl === undefined) reject(new Error(`idempo console printed no token address: ${stdout}`));
      else resolve({ url, tokenUrl, stop });
    });
  });
}
