/**
 * Whether the machine's brokers answer. A test file whose broker does not
 * answer skips, and says so loudly: a silent skip would read as a pass.
 */
import { execFile } from "node:child_process";
import { connect } from "node:net";
import { promisify } from "node:util";

export const RABBIT_URL = process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
export const NATS_SERVER = process.env.NATS_SERVER ?? "127.0.0.1:4222";

export const run = promisify(execFile);

/** True when something accepts TCP connections on host:port within 3 s. */
export function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 3_000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}

export async function brokerUp(name: string, host: string, port: number): Promise<boolean> {
  const up = await answers(host, port);
  if (!up) {
    console.warn(
      `\n!!!!!!!!!!\n!!! ${name} does not answer on ${host}:${port}: its relay tests are SKIPPED, nothing was verified.\n!!! Start it (bash .ci/run does) and run the tests again.\n!!!!!!!!!!\n`,
    );
  }
  return up;
}
