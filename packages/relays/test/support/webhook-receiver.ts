/**
 * A webhook receiver on loopback that misbehaves on purpose. It verifies
 * every request with `verifyWebhook`, records it, applies it once through
 * the `received` table (keyed on `Idempotency-Key`), and then answers as
 * the test's `behave` callback says: at once, with an error status, never,
 * by dropping the socket, or late (after a later attempt of the same
 * message has arrived, so the sender has certainly given up on it).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { AnyDb } from "../../../testkit/src/index.ts";
import type { WebhookEvent } from "../../src/webhook/index.ts";
import { verifyWebhook } from "../../src/webhook/index.ts";
import { applyOnce } from "./database.ts";

export type Behaviour =
  | { kind: "ok" }
  | { kind: "status"; status: number }
  | { kind: "hang" }
  | { kind: "drop" }
  | { kind: "late" };

export interface Arrival {
  readonly key: string;
  readonly event: WebhookEvent;
  /** 1 for the first request carrying this key, +1 for each later one. */
  readonly nth: number;
}

export interface Receiver {
  readonly url: string;
  readonly arrivals: Arrival[];
  /** Requests refused for a bad signature. */
  readonly refused: number;
  count(key: string): number;
  close(): Promise<void>;
}

export async function startReceiver(
  db: AnyDb,
  consumer: string,
  secret: string,
  behave: (arrival: Arrival) => Behaviour,
): Promise<Receiver> {
  const arrivals: Arrival[] = [];
  const lateAnswers = new Map<string, () => void>();
  let refused = 0;
  const count = (key: string) => arrivals.filter((a) => a.key === key).length;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let event: WebhookEvent;
    try {
      event = verifyWebhook({ body, signature: req.headers["idempo-signature"] as string | undefined, secret });
    } catch {
      refused++;
      res.writeHead(400).end("bad signature");
      return;
    }
    const key = String(req.headers["idempotency-key"]);
    if (key !== event.id) throw new Error(`Idempotency-Key ${key} differs from the event id ${event.id}`);
    const arrival = { key, event, nth: count(key) + 1 };
    arrivals.push(arrival);
    // A later attempt of a message answered "late" releases the earlier answer.
    lateAnswers.get(key)?.();
    lateAnswers.delete(key);
    const behaviour = behave(arrival);
    if (behaviour.kind === "hang") return; // never answered; closed with the server
    if (behaviour.kind === "drop") {
      req.socket.destroy();
      return;
    }
    if (behaviour.kind === "status") {
      res.writeHead(behaviour.status).end(`refused with ${behaviour.status}`);
      return;
    }
    await applyOnce(db, key, consumer);
    if (behaviour.kind === "late") {
      lateAnswers.set(key, () => res.writeHead(200).end("applied (late)"));
      return;
    }
    res.writeHead(200).end("applied");
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      res.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/idempo`,
    arrivals,
    get refused() {
      return refused;
    },
    count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
