/**
 * The parent's side of the kill tests: start a relay process
 * (test/fixtures/relay-process.ts), wait until it holds a delivery at the
 * chosen fault point, and SIGKILL it there.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { FaultPoint } from "../../src/faults.ts";

export interface ChildConfig {
  broker: "amqp" | "nats";
  databaseUrl: string;
  amqpUrl: string;
  natsServer: string;
  topic: string;
  /** The queue (AMQP, via the default exchange) or subject (NATS) to publish to. */
  target: string;
  stopAt: FaultPoint;
  passFirst: number;
  /** The relay's claim length: the parent's relay takes the held messages over once it runs out. */
  leaseMs: number;
}

export type ChildMessage = { type: "ready" } | { type: "held"; deliveryKey: string };

const FIXTURE = fileURLToPath(new URL("../fixtures/relay-process.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Run the relay process until it holds a delivery at `stopAt`, then SIGKILL
 * it. Resolves with the delivery keys it held when it died.
 */
export function killRelayAtHold(config: ChildConfig): Promise<string[]> {
  const child = fork(FIXTURE, [JSON.stringify(config)], {
    cwd: PACKAGE_DIR,
    execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const held: string[] = [];
  return new Promise((resolve, reject) => {
    let killed = false;
    child.on("message", (message: ChildMessage) => {
      if (message.type !== "held") return;
      held.push(message.deliveryKey);
      if (!killed) {
        killed = true;
        child.kill("SIGKILL");
      }
    });
    child.on("error", reject);
    child.once("close", (code, signal) => {
      if (signal === "SIGKILL" && killed) resolve([...new Set(held)]);
      else
        reject(
          new Error(`the relay process ended on its own (code ${code}, signal ${signal}) before holding a delivery`),
        );
    });
  });
}
