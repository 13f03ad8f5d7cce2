/**
 * A stand-in for a card payment provider with 3-D Secure, served over HTTP
 * on loopback so that every process of the shop (the web process, any
 * worker) talks to the same one. Like Stripe, it keeps each idempotency
 * key with the request it came with and answers a repeat with the first
 * answer, without doing anything again. It counts what it did, so the demo
 * can tell requests (retries repeat them) from effects (authorizations,
 * captures, voids: one each at most per payment).
 *
 * When the customer completes the challenge ({@link FakePsp.confirm}) it
 * notifies the shop's webhook, signed, and sends the same event again, as
 * providers do when they are unsure the first delivery arrived.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { PspPayment } from "./psp-client.js";
import type { PspEvent } from "./psp-events.js";
import { PSP_SIGNATURE_HEADER, signBody, THREE_DS_COMPLETED } from "./psp-events.js";

/** What the provider did, counted once per effect. */
export interface PspCounts {
  /** Requests received (repeats included). */
  requests: number;
  authorizations: number;
  /** Captures: the money taken, the charges. */
  captures: number;
  voids: number;
  /** Webhook deliveries sent, and those the shop answered with a 2xx. */
  webhookDeliveries: number;
  webhookAcknowledged: number;
}

/** One webhook delivery as the provider saw it. */
interface Delivery {
  readonly status: number;
  readonly body: unknown;
}

interface Known {
  readonly request: string;
  readonly status: number;
  readonly answer: unknown;
}

/**
 * The fake provider.
 *
 * @example
 * const psp = new FakePsp({ webhookSecret: 'whsec_demo' })
 * const url = await psp.start()
 * psp.webhookUrl = 'http://127.0.0.1:3000/webhooks/psp'
 * await psp.confirm(paymentId)           // the customer passed the challenge: webhook x3
 */
export class FakePsp {
  readonly counts: PspCounts = {
    requests: 0,
    authorizations: 0,
    captures: 0,
    voids: 0,
    webhookDeliveries: 0,
    webhookAcknowledged: 0,
  };
  /** Where events go; set once the shop listens. */
  webhookUrl: string | undefined;
  readonly #secret: string;
  readonly #payments = new Map<string, PspPayment>();
  readonly #keys = new Map<string, Known>();
  #server: http.Server | undefined;
  #url = "";

  constructor(options: { webhookSecret: string }) {
    this.#secret = options.webhookSecret;
  }

  /** Listen on a free loopback port; resolves with the base URL. */
  async start(): Promise<string> {
    const server = http.createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ code: String(error) }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.#server = server;
    this.#url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.#url;
  }

  /** Stop listening and close idle connections. */
  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** How many payments are in `status` now (`captured`: the charges). */
  paymentsIn(status: PspPayment["status"]): number {
    return [...this.#payments.values()].filter((p) => p.status === status).length;
  }

  /** A payment by id, or undefined. */
  payment(id: string): PspPayment | undefined {
    return this.#payments.get(id);
  }

  /**
   * The customer completed the 3-D Secure challenge of `paymentId`: send
   * the signed event to the webhook `1 + repeats` times (Default: 2
   * repeats), one after the other, and return what the shop answered each.
   */
  async confirm(paymentId: string, options: { outcome?: "succeeded" | "failed"; repeats?: number } = {}) {
    const payment = this.#payments.get(paymentId);
    if (!payment) throw new Error(`no payment ${paymentId}`);
    if (!this.webhookUrl) throw new Error("set webhookUrl first");
    const outcome = options.outcome ?? "succeeded";
    if (outcome === "succeeded" && payment.status === "requires_action") {
      this.#payments.set(paymentId, { ...payment, status: "requires_capture" });
    }
    const event: PspEvent = {
      id: `evt_${randomUUID().slice(0, 12)}`,
      type: THREE_DS_COMPLETED,
      data: { paymentId, outcome, reference: payment.reference },
    };
    const body = JSON.stringify(event);
    const deliveries: Delivery[] = [];
    for (let i = 0; i <= (options.repeats ?? 2); i++) {
      this.counts.webhookDeliveries++;
      const res = await fetch(this.webhookUrl, {
        method: "POST",
        headers: { "content-type": "application/json", [PSP_SIGNATURE_HEADER]: signBody(this.#secret, body) },
        body,
      });
      if (res.ok) this.counts.webhookAcknowledged++;
      deliveries.push({ status: res.status, body: await res.json().catch(() => null) });
    }
    return deliveries;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.counts.requests++;
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const key = req.headers["idempotency-key"];
    const send = (status: number, answer: unknown): void => {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(answer));
    };
    if (typeof key !== "string" || key.length === 0 || key.length > 255) {
      return send(400, { code: "idempotency_key_required" });
    }
    const request = `${req.method} ${req.url} ${text}`;
    const known = this.#keys.get(key);
    if (known) {
      if (known.request !== request) return send(400, { code: "idempotency_key_reused" });
      return send(known.status, known.answer);
    }
    const [status, answer] = this.#act(req.url ?? "", JSON.parse(text || "{}") as Record<string, unknown>);
    this.#keys.set(key, { request, status, answer });
    send(status, answer);
  }

  /** Do what a new request asks: [status, answer]. */
  #act(url: string, body: Record<string, unknown>): [number, unknown] {
    if (url === "/v1/payments") {
      this.counts.authorizations++;
      const id = `pay_${String(this.counts.authorizations).padStart(4, "0")}`;
      const payment: PspPayment = {
        id,
        orderId: String(body.orderId),
        amountCents: Number(body.amountCents),
        status: "requires_action",
        challengeUrl: `${this.#url}/3ds/${id}`,
        reference: body.reference as PspPayment["reference"],
      };
      this.#payments.set(id, payment);
      return [201, payment];
    }
    const m = /^\/v1\/payments\/([^/]+)\/(capture|void)$/.exec(url);
    const payment = m ? this.#payments.get(decodeURIComponent(m[1] as string)) : undefined;
    if (!m || !payment) return [404, { code: "not_found" }];
    // Only a confirmed payment can be captured; one not captured yet can be voided.
    const allowed = m[2] === "capture" ? ["requires_capture"] : ["requires_action", "requires_capture"];
    if (!allowed.includes(payment.status)) return [409, { code: `payment_${payment.status}` }];
    const next: PspPayment = { ...payment, status: m[2] === "capture" ? "captured" : "voided" };
    if (m[2] === "capture") this.counts.captures++;
    else this.counts.voids++;
    this.#payments.set(payment.id, next);
    return [200, next];
  }
}
