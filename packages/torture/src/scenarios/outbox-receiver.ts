/**
 * The receiving end of the durable scenario's outbox messages: a webhook
 * endpoint on loopback that the workers' relays deliver to with
 * `createWebhookSender`. It verifies every request, records it under its
 * delivery key, and now and then answers 503 on purpose, either before it
 * records the message (the relay retries) or after (the receiver acted but
 * the relay is told otherwise, so the same key arrives again).
 *
 * The verdict counts by delivery key: a key that arrives with two
 * different payloads, or one logical message (tenant and intent) that
 * arrives under more keys than the operator asked for, is an effect made
 * twice; an expected message that never arrived is lost.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { verifyWebhook } from "@idempo/relays/webhook";
import type { Random } from "../random.ts";

/** What the receiver found, against what was expected. */
interface OutboxVerdict {
  /** Logical messages (tenant and intent) that arrived. */
  readonly messages: number;
  /** Deliveries the receiver recorded, redeliveries included. */
  readonly deliveries: number;
  /** Deliveries of a key that had arrived before: at-least-once at work, absorbed by the key. */
  readonly redeliveries: number;
  /** Keys beyond the first of a message that the operator asked for (`retryFrom` with `resendOutbox`). */
  readonly intendedResends: number;
  /** A key with two payloads, or a message under more keys than asked for. Must be 0. */
  readonly duplicateEffects: number;
  /** Keys an expected message did not arrive under, and messages nobody expected. Must be 0. */
  readonly lost: number;
  readonly problems: readonly string[];
}

/** A running receiver. */
export interface OutboxReceiver {
  readonly url: string;
  readonly secret: string;
  /**
   * Compare the arrivals with `expected`: for each logical message
   * (`tenant/intent`), the number of delivery keys it should arrive under
   * (1, plus one per resend the operator asked for).
   */
  verdict(expected: ReadonlyMap<string, number>): OutboxVerdict;
  close(): Promise<void>;
}

interface Arrival {
  readonly payload: string;
  readonly message: string;
}

/** Start the receiver on 127.0.0.1, on a free port. */
export async function startOutboxReceiver(rnd: Random): Promise<OutboxReceiver> {
  const secret = randomBytes(24).toString("base64url");
  const byKey = new Map<string, Arrival[]>();
  let refused = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const event = verifyWebhook({
      body: Buffer.concat(chunks),
      signature: req.headers["idempo-signature"] as string | undefined,
      secret,
    });
    const roll = rnd.next();
    if (roll < 0.1) {
      res.writeHead(503).end("busy, not applied");
      return;
    }
    const payload = event.payload as { intent?: unknown };
    const arrival = { payload: JSON.stringify(event.payload), message: `${event.tenantId}/${String(payload.intent)}` };
    byKey.set(event.id, [...(byKey.get(event.id) ?? []), arrival]);
    // Applied, but the answer says otherwise: the relay delivers the same key again.
    res.writeHead(roll < 0.15 ? 503 : 200).end("applied");
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      refused++;
      res.writeHead(400).end("refused");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hooks/payments`,
    secret,
    verdict: (expected) => {
      const problems: string[] = [];
      let deliveries = 0;
      let redeliveries = 0;
      let duplicateEffects = 0;
      const keysOf = new Map<string, string[]>();
      for (const [key, arrivals] of byKey) {
        deliveries += arrivals.length;
        redeliveries += arrivals.length - 1;
        const payloads = new Set(arrivals.map((a) => a.payload));
        if (payloads.size > 1) {
          duplicateEffects += payloads.size - 1;
          problems.push(`delivery key ${key} arrived with ${payloads.size} payloads: ${[...payloads].join(" / ")}`);
        }
        for (const message of new Set(arrivals.map((a) => a.message))) {
          keysOf.set(message, [...(keysOf.get(message) ?? []), key]);
        }
      }
      let intendedResends = 0;
      let lost = refused;
      if (refused > 0) problems.push(`${refused} deliveries refused (bad signature or body)`);
      for (const [message, keys] of keysOf) {
        const want = expected.get(message);
        if (want === undefined) {
          lost++;
          problems.push(`message ${message} arrived, but no run was expected to send it`);
          continue;
        }
        intendedResends += Math.min(keys.length, want) - 1;
        if (keys.length > want) {
          duplicateEffects += keys.length - want;
          problems.push(`message ${message} arrived under ${keys.length} delivery keys, ${want} expected`);
        }
      }
      for (const [message, want] of expected) {
        const got = keysOf.get(message)?.length ?? 0;
        if (got < want) {
          lost += want - got;
          problems.push(`message ${message} arrived under ${got} delivery keys, ${want} expected`);
        }
      }
      return {
        messages: keysOf.size,
        deliveries,
        redeliveries,
        intendedResends,
        duplicateEffects,
        lost,
        problems,
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
