/**
 * JetStream for the tests: a file-backed stream per test (it survives a
 * server restart), a real consumer that reads every stored message, and a
 * restart of the machine's nats-server with the command that started it.
 */
import { randomUUID } from "node:crypto";
import type { JetStreamManager } from "@nats-io/jetstream";
import { jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { nanos } from "@nats-io/transport-node";
import { answers, run } from "./brokers.ts";

export interface TestStream {
  readonly name: string;
  readonly subject: string;
}

export async function createStream(jsm: JetStreamManager, duplicateWindowMs = 120_000): Promise<TestStream> {
  const id = randomUUID().slice(0, 8);
  const stream = { name: `IDEMPO_TEST_${id}`, subject: `idempo.test.${id}` };
  await jsm.streams.add({
    name: stream.name,
    subjects: [stream.subject],
    storage: StorageType.File,
    duplicate_window: nanos(duplicateWindowMs),
  });
  return stream;
}

/** One stored message as a consumer sees it. */
export interface StoredMessage {
  readonly msgId: string;
  readonly tenant: string;
  readonly body: unknown;
}

/** Read every message the stream holds, through an ordered consumer. */
export async function readStream(nc: NatsConnection, stream: string): Promise<StoredMessage[]> {
  const jsm = await jetstreamManager(nc);
  const total = (await jsm.streams.info(stream)).state.messages;
  const consumer = await jetstream(nc).consumers.get(stream);
  const out: StoredMessage[] = [];
  while (out.length < total) {
    const batch = await consumer.fetch({ max_messages: total - out.length, expires: 2_000 });
    for await (const m of batch) {
      out.push({
        msgId: m.headers?.get("Nats-Msg-Id") ?? "",
        tenant: m.headers?.get("Idempo-Tenant") ?? "",
        body: m.json(),
      });
    }
  }
  return out;
}

const NATS_START = [
  "--start",
  "--oknodo",
  "--background",
  "--exec",
  "/usr/sbin/nats-server",
  "--",
  "-a",
  "127.0.0.1",
  "-p",
  "4222",
  "-js",
  "-sd",
  "/var/lib/nats-server",
  "-l",
  "/var/log/nats-server.log",
];

/** Stop the machine's nats-server and start it again; resolves once it accepts connections. */
export async function restartNats(): Promise<void> {
  await run("start-stop-daemon", [
    "--stop",
    "--oknodo",
    "--retry",
    "TERM/20/KILL/5",
    "--exec",
    "/usr/sbin/nats-server",
  ]);
  await run("start-stop-daemon", NATS_START);
  const deadline = Date.now() + 60_000;
  while (!(await answers("127.0.0.1", 4222))) {
    if (Date.now() > deadline) throw new Error("nats-server did not come back within 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether this process may restart the server (root, start-stop-daemon present). */
export async function canRestartNats(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  return run("start-stop-daemon", ["--version"]).then(
    () => true,
    () => false,
  );
}
