/**
 * The routes every adapter's test app serves, written once. Each harness
 * turns them into its framework's routes: wrapped handlers (the middleware)
 * and workflow routes. Handlers count their runs in `Effects` under the
 * request body's `tag`, and can be held at a gate named in the body.
 */
import { randomUUID } from "node:crypto";
import type { Engine, Workflow } from "@idempo/core";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import type { HandlerRun } from "../../src/runtime/wrapped-run.ts";
import type { TestDb } from "./database.ts";
import type { Effects } from "./effects.ts";

export interface AppDeps {
  readonly engine: Engine;
  readonly db: TestDb;
  readonly effects: Effects;
}

export interface RunningApp {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts one adapter's app on a free loopback port. */
export interface Harness {
  readonly name: string;
  /** Whether the harness can also serve cleartext HTTP/2. */
  readonly http2: boolean;
  /** Whether middleware can be mounted in front of a router (false: each route is its own handler). Default true. */
  readonly mounts?: boolean;
  /** Whether repeated header lines reach the adapter joined into one (a Fetch `Headers`). Default false. */
  readonly joinsKeyLines?: boolean;
  start(deps: AppDeps, options?: { http2?: boolean }): Promise<RunningApp>;
}

/** Credentials the test apps accept; `t1` has two (a tenant is not a credential). */
const TOKENS: Readonly<Record<string, string>> = { "t1-a": "t1", "t1-b": "t1", t2: "t2", empty: "" };

/** The tenant of a request, from its `Authorization: Bearer <token>` header, as authentication would give it. */
export function tenantOf(authorization: string | undefined): string | undefined {
  const token = /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
  return token === undefined ? undefined : TOKENS[token];
}

/** A request as a test handler sees it. */
export interface TestRequest {
  readonly params: Readonly<Record<string, string>>;
  /** Parsed JSON, or a Buffer for other media types, or undefined. */
  readonly body: unknown;
  readonly run: HandlerRun | null | undefined;
}

/** What a test handler answers; the harness writes it the framework's way. */
export interface TestResponse {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string | string[]>>;
  readonly json?: unknown;
  readonly bytes?: Buffer;
  readonly text?: string;
  /** Sent as a stream, chunk by chunk. */
  readonly chunks?: readonly string[];
}

interface WrapRoute {
  readonly kind: "wrap";
  readonly method: "POST" | "DELETE";
  readonly path: string;
  /** Mount the framework's JSON body parser before the middleware (Express; the others always parse lazily). */
  readonly parseFirst?: boolean;
  readonly options: {
    required?: boolean;
    methods?: string[];
    maxRequestBytes?: number;
    maxResponseBytes?: number;
    storeResponse?: (status: number) => boolean;
  };
  handle(req: TestRequest): Promise<TestResponse>;
}

interface WorkflowRoute {
  readonly kind: "workflow";
  readonly method: "POST" | "DELETE";
  readonly path: string;
  readonly options?: { maxRequestBytes?: number };
  // biome-ignore lint/suspicious/noExplicitAny: routes hold workflows of different input types
  readonly workflow: Workflow<any, any>;
  input(req: TestRequest): unknown;
  headers?(response: { status: number; body: unknown }): Record<string, string>;
}

export type TestRoute = WrapRoute | WorkflowRoute;

const MIB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface TestBody {
  tag?: string;
  gate?: string;
  size?: number;
  amount?: number;
}
const bodyOf = (req: TestRequest): TestBody =>
  req.body !== null && typeof req.body === "object" && !Buffer.isBuffer(req.body) ? (req.body as TestBody) : {};

/** A JSON document of at least `size` bytes, the same for the same size. */
function bigDocument(size: number): unknown {
  const items = [];
  for (let i = 0; i * 100 < size; i++) items.push({ i, pad: "x".repeat(88) });
  return { items };
}

function testWorkflows(effects: Effects) {
  const cartInput = z.object({
    cartId: z.string(),
    amountCents: z.number().int().positive(),
    tag: z.string().optional(),
    gate: z.string().optional(),
    sleepMs: z.number().int().optional(),
  });
  const checkout = workflow("checkout")
    .input(cartInput)
    .phase("create_order", async ({ tx, input, tenantId, reject, fail }) => {
      if (input.cartId === "reject") reject(409, { code: "cart_locked" });
      effects.ran(input.tag ?? input.cartId);
      if (input.gate) await effects.gate(input.gate).pass();
      if (input.sleepMs) await sleep(input.sleepMs);
      const orderId = `o_${randomUUID().slice(0, 8)}`;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
        VALUES (${orderId}, ${tenantId}, ${input.cartId}, ${input.amountCents})`.execute(tx);
      if (input.amountCents === 402) fail(402, { code: "card_declined", orderId });
      return { orderId };
    })
    .step("charge", async ({ input, idempotencyKey }) => ({
      chargeId: effects.payments.charge(idempotencyKey, input.amountCents),
    }))
    .phase("record_charge", async ({ tx, state }) => {
      await sql`UPDATE orders SET status = 'paid', charge_id = ${state.chargeId} WHERE id = ${state.orderId}`.execute(
        tx,
      );
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));

  const refund = workflow("refund")
    .input(cartInput)
    .phase("create_refund", async ({ tx, input, tenantId }) => {
      effects.ran(`refund:${input.tag ?? input.cartId}`);
      const refundId = `re_${randomUUID().slice(0, 8)}`;
      await sql`INSERT INTO refunds (id, tenant_id, order_id) VALUES (${refundId}, ${tenantId}, ${input.cartId})`.execute(
        tx,
      );
      return { refundId };
    })
    .respond(({ state }) => ({ status: 201, body: { refundId: state.refundId } }));

  const cancelOrder = workflow("cancel_order")
    .input(z.object({ orderId: z.string() }))
    .phase("cancel", async ({ tx, input }) => {
      effects.ran(`cancel:${input.orderId}`);
      await sql`UPDATE orders SET status = 'cancelled' WHERE id = ${input.orderId}`.execute(tx);
    })
    .respond(() => ({ status: 204, body: null }));

  return { checkout, refund, cancelOrder };
}

export function testRoutes(deps: AppDeps): TestRoute[] {
  const { effects, db } = deps;
  const flows = testWorkflows(effects);

  const createOrder = async (req: TestRequest): Promise<TestResponse> => {
    const body = bodyOf(req);
    effects.ran(body.tag);
    if (body.gate) await effects.gate(body.gate).pass();
    const orderId = `o_${randomUUID().slice(0, 8)}`;
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
      VALUES (${orderId}, ${req.run?.tenantId ?? "anonymous"}, ${body.tag ?? "-"}, 1)`.execute(db);
    return {
      status: 201,
      headers: { location: `/orders/${orderId}`, "set-cookie": ["session=s1; Path=/", "seen=1"], "x-custom": "yes" },
      json: { orderId, tag: body.tag ?? null, attempt: req.run?.attempt ?? null },
    };
  };
  const large = async (req: TestRequest): Promise<TestResponse> => {
    const body = bodyOf(req);
    effects.ran(body.tag);
    return { status: 200, json: bigDocument(body.size ?? MIB) };
  };

  return [
    { kind: "wrap", method: "POST", path: "/wrapped/orders", options: { required: true }, handle: createOrder },
    { kind: "wrap", method: "POST", path: "/wrapped/optional", parseFirst: true, options: {}, handle: createOrder },
    {
      kind: "wrap",
      method: "DELETE",
      path: "/wrapped/orders/:id",
      options: { required: true, methods: ["DELETE"] },
      async handle(req) {
        effects.ran(`delete:${req.params.id}`);
        return { status: 204 };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/binary",
      options: { required: true },
      async handle(req) {
        effects.ran(bodyOf(req).tag);
        const bytes = Buffer.alloc(1024);
        for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256;
        return {
          status: 200,
          headers: {
            "content-type": "application/octet-stream",
            "content-disposition": 'attachment; filename="blob.bin"',
          },
          bytes,
        };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/text",
      options: { required: true },
      async handle(req) {
        effects.ran(bodyOf(req).tag);
        return {
          status: 200,
          headers: { "content-type": "text/plain; charset=utf-8" },
          text: "\ufeffhéllo ✓\u2028 wörld 😀\n",
        };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/stream",
      options: { required: true },
      async handle(req) {
        effects.ran(bodyOf(req).tag);
        return {
          status: 200,
          headers: { "content-type": "text/plain; charset=utf-8" },
          chunks: ["one,", "two,", "three"],
        };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/raw",
      options: { required: true },
      async handle(req) {
        const bytes = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        effects.ran(`raw:${bytes.toString("latin1").slice(0, 12)}`);
        return { status: 200, json: { length: bytes.length } };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/large",
      options: { required: true, maxRequestBytes: 4 * MIB, maxResponseBytes: 8 * MIB },
      handle: large,
    },
    { kind: "wrap", method: "POST", path: "/wrapped/capped", options: { required: true }, handle: large },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/validate",
      options: { required: true, storeResponse: (status) => status !== 400 },
      async handle(req) {
        const body = bodyOf(req);
        effects.ran(body.tag);
        if ((body.amount ?? 0) <= 0) return { status: 400, json: { error: "amount must be positive" } };
        return { status: 201, json: { ok: true, amount: body.amount } };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/fail",
      options: { required: true },
      async handle(req) {
        effects.ran(bodyOf(req).tag);
        throw new Error("the handler failed");
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/answers-500",
      options: { required: true },
      async handle(req) {
        effects.ran(bodyOf(req).tag);
        return { status: 500, json: { error: "the handler answered 500" } };
      },
    },
    {
      kind: "wrap",
      method: "POST",
      path: "/wrapped/small",
      options: { required: true, maxRequestBytes: 64 * 1024 },
      handle: createOrder,
    },
    {
      kind: "workflow",
      method: "POST",
      path: "/orders",
      workflow: flows.checkout,
      input: (req) => req.body,
      headers: (res) =>
        res.status === 201 ? { Location: `/orders/${(res.body as { orderId: string }).orderId}` } : {},
    },
    { kind: "workflow", method: "POST", path: "/refunds", workflow: flows.refund, input: (req) => req.body },
    {
      kind: "workflow",
      method: "POST",
      path: "/refunds/small",
      workflow: flows.refund,
      input: (req) => req.body,
      options: { maxRequestBytes: 64 * 1024 },
    },
    {
      kind: "workflow",
      method: "DELETE",
      path: "/orders/:id",
      workflow: flows.cancelOrder,
      input: (req) => ({ orderId: req.params.id }),
    },
  ];
}

/**
 * Handlers served behind the middleware mounted for the whole `/mounted`
 * prefix (app.use, or Fastify's plugin), not per route, with a middleware
 * between the two that fails when the request carries `x-fail-before-handler`.
 * A request to `/mounted/<anything else>` reaches no route.
 */
export interface MountedHandlers {
  /** POST /mounted/orders: answers 201 and writes an order. */
  orders(req: TestRequest): Promise<TestResponse>;
  /** POST /mounted/fail: throws after counting its run. */
  fail(req: TestRequest): Promise<TestResponse>;
}

export const FAIL_BEFORE_HANDLER = "x-fail-before-handler";

export function mountedHandlers(deps: AppDeps): MountedHandlers {
  const { effects } = deps;
  return {
    async orders(req) {
      const body = bodyOf(req);
      effects.ran(body.tag);
      return { status: 201, json: { tag: body.tag ?? null, attempt: req.run?.attempt ?? null } };
    },
    async fail(req) {
      effects.ran(bodyOf(req).tag);
      throw new Error("the mounted handler failed");
    },
  };
}
