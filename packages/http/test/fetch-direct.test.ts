/**
 * The Fetch handler called directly with Node's own `Request`, as a Next.js
 * route handler, Bun or Deno calls it (no server in between): the run and
 * the caller's extra arguments reach the handler, the request reaches it
 * unread and as the same object, a replay carries the stored answer, 409
 * while the first runs, 422 for another body, 400 for a bad key, a stored
 * content coding the retry refuses is decoded or answered 406 with `Vary`
 * kept, a thrown error releases the key. Real PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { HandlerRun } from "../src/adapters/fetch.ts";
import { idempotency, idempotent, webhook } from "../src/adapters/fetch.ts";
import { deferred } from "../src/runtime/deferred.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const tenant = (request: Request) => request.headers.get("x-account") ?? undefined;
const URL_BASE = "http://app.test";

const post = (path: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
  new Request(`${URL_BASE}${path}`, {
    method: "POST",
    headers: {
      "x-account": "acct-1",
      "content-type": "application/json",
      ...(key === undefined ? {} : { "idempotency-key": key }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
const problem = async (res: Response) => ({
  status: res.status,
  type: res.headers.get("content-type"),
  code: ((await res.json()) as { code?: string }).code,
});
const rowsFor = async (key: string) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${key}`.execute(t.db)).rows[0]?.n;

describe("a wrapped Fetch handler, called directly", () => {
  it("runs once per key and replays status, headers and bytes; the run and the caller's arguments reach the handler", async () => {
    const seen: { run: HandlerRun | undefined; context: { params: { id: string } }; body: unknown }[] = [];
    const POST = idempotency<[{ params: { id: string } }]>(
      t.engine,
      { tenant, required: true },
      async (request, run, context) => {
        seen.push({ run, context, body: await request.json() });
        return Response.json({ n: seen.length }, { status: 201, headers: { location: "/orders/1", "x-other": "no" } });
      },
    );
    const key = `k-${randomUUID()}`;
    const first = await POST(post("/api/orders", key, { a: 1 }), { params: { id: "7" } });
    const again = await POST(post("/api/orders", key, { a: 1 }), { params: { id: "7" } });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(await again.text()).toBe(await first.text());
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(again.headers.get("location")).toBe("/orders/1");
    expect(again.headers.get("x-other")).toBeNull();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      run: { key, tenantId: "acct-1", attempt: 1 },
      context: { params: { id: "7" } },
      body: { a: 1 },
    });
    expect(await rowsFor(key)).toBe(1);
  });

  it("hands the handler the request object itself, unread (a subclass such as NextRequest stays one)", async () => {
    class AppRequest extends Request {
      readonly tag = "app";
    }
    let got: Request | undefined;
    const POST = idempotency(t.engine, { tenant }, async (request) => {
      got = request;
      return new Response(await request.text(), { status: 200 });
    });
    const request = new AppRequest(post("/api/echo", `k-${randomUUID()}`, { echo: "é" }));
    const res = await POST(request);
    expect(got).toBe(request);
    expect(await res.text()).toBe('{"echo":"é"}');
  });

  it("passes a request without a key through with no run, and refuses it with 400 key_missing where a key is required", async () => {
    const runs: (HandlerRun | undefined)[] = [];
    const handler = async (_request: Request, run: HandlerRun | undefined) => {
      runs.push(run);
      return new Response(null, { status: 204 });
    };
    const optional = idempotency(t.engine, { tenant }, handler);
    const required = idempotency(t.engine, { tenant, required: true }, handler);
    expect((await optional(post("/api/x", undefined, {}))).status).toBe(204);
    expect(await problem(await required(post("/api/x", undefined, {})))).toEqual({
      status: 400,
      type: "application/problem+json",
      code: "key_missing",
    });
    expect(await problem(await required(post("/api/x", "a-1, b-1", {})))).toMatchObject({
      status: 400,
      code: "invalid_key",
    });
    expect(runs).toEqual([undefined]);
  });

  it("answers 409 key_in_progress while the first runs and 422 key_mismatch for another body or path", async () => {
    const held = deferred<void>();
    const inside = deferred<void>();
    let ran = 0;
    const POST = idempotency(t.engine, { tenant }, async () => {
      ran++;
      inside.resolve();
      await held.promise;
      return Response.json({ ok: true }, { status: 201 });
    });
    const key = `k-${randomUUID()}`;
    const first = POST(post("/api/pay", key, { amount: 5 }));
    await inside.promise;
    const busy = await POST(post("/api/pay", key, { amount: 5 }));
    expect(busy.headers.get("retry-after")).not.toBeNull();
    expect(await problem(busy)).toEqual({ status: 409, type: "application/problem+json", code: "key_in_progress" });
    held.resolve();
    expect((await first).status).toBe(201);
    expect(await problem(await POST(post("/api/pay", key, { amount: 6 })))).toMatchObject({
      status: 422,
      code: "key_mismatch",
    });
    expect(await problem(await POST(post("/api/other", key, { amount: 5 })))).toMatchObject({
      status: 422,
      code: "key_mismatch",
    });
    expect(ran).toBe(1);
  });

  it("decodes a stored gzip body for a retry that refuses gzip, answers 406 for a coding it cannot decode, and keeps Vary", async () => {
    const text = JSON.stringify({ report: "x".repeat(2000) });
    const coded = (coding: string, bytes: Uint8Array) =>
      idempotency(
        t.engine,
        { tenant },
        async () =>
          new Response(bytes, {
            status: 200,
            headers: { "content-type": "application/json", "content-encoding": coding, vary: "Accept-Encoding" },
          }),
      );
    const gz = coded("gzip", gzipSync(text));
    const key = `k-${randomUUID()}`;
    await gz(post("/api/report", key, {}, { "accept-encoding": "gzip" }));
    const plain = await gz(post("/api/report", key, {}, { "accept-encoding": "identity" }));
    expect({
      status: plain.status,
      coding: plain.headers.get("content-encoding"),
      vary: plain.headers.get("vary"),
      text: await plain.text(),
    }).toEqual({ status: 200, coding: null, vary: "Accept-Encoding", text });

    const unknown = coded("x-custom", new TextEncoder().encode("opaque"));
    const other = `k-${randomUUID()}`;
    await unknown(post("/api/report", other, {}, { "accept-encoding": "x-custom" }));
    const refused = await unknown(post("/api/report", other, {}, { "accept-encoding": "gzip" }));
    expect(await problem(refused)).toEqual({ status: 406, type: "application/problem+json", code: "not_acceptable" });
    const same = await unknown(post("/api/report", other, {}, { "accept-encoding": "x-custom" }));
    expect([same.status, same.headers.get("content-encoding"), await same.text()]).toEqual([200, "x-custom", "opaque"]);
  });

  it("a handler that throws: the error reaches the caller, nothing is stored, the retry runs the handler", async () => {
    let ran = 0;
    const POST = idempotency(t.engine, { tenant }, async () => {
      ran++;
      if (ran === 1) throw new Error("boom");
      return new Response("ok", { status: 200 });
    });
    const key = `k-${randomUUID()}`;
    await expect(POST(post("/api/flaky", key, {}))).rejects.toThrow("boom");
    expect(await rowsFor(key)).toBe(0);
    expect((await POST(post("/api/flaky", key, {}))).status).toBe(200);
    expect(ran).toBe(2);
  });

  it("413 request_too_large for a body above maxRequestBytes, before the handler", async () => {
    let ran = 0;
    const POST = idempotency(t.engine, { tenant, maxRequestBytes: 100 }, async () => {
      ran++;
      return new Response("ok");
    });
    const res = await POST(post("/api/big", `k-${randomUUID()}`, { pad: "p".repeat(200) }));
    expect(await problem(res)).toMatchObject({ status: 413, code: "request_too_large" });
    expect(ran).toBe(0);
  });
});

describe("a Fetch workflow route and webhook, called directly", () => {
  const checkout = workflow("fetch_direct_checkout")
    .input(z.object({ cartId: z.string() }))
    .phase("order", () => ({ orderId: `o_${randomUUID().slice(0, 8)}` }))
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));

  it("runs the workflow once, replays its JSON, 422 for another body, 400 invalid_input for a bad one", async () => {
    const POST = idempotent(t.engine, checkout, { tenant, input: (request) => request.json() });
    const key = `k-${randomUUID()}`;
    const first = await POST(post("/api/checkout", key, { cartId: "c1" }));
    const again = await POST(post("/api/checkout", key, { cartId: "c1" }));
    expect(first.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
    expect(await problem(await POST(post("/api/checkout", key, { cartId: "c2" })))).toMatchObject({
      status: 422,
      code: "key_mismatch",
    });
    expect(await problem(await POST(post("/api/checkout", `k-${randomUUID()}`, { cart: 1 })))).toMatchObject({
      status: 400,
      code: "invalid_input",
    });
  });

  it("a webhook whose signature does not verify is refused with 401 webhook_unverified", async () => {
    const POST = webhook(t.engine, {
      verify: ({ request, rawBody }) => request.headers.get("x-signature") === `sig:${rawBody.length}`,
      signal: () => ({ tenantId: "acct-1", key: "none", name: "3ds", payload: {} }),
    });
    expect(
      await problem(await POST(post("/api/hook", undefined, { e: 1 }, { "x-signature": "forged" }))),
    ).toMatchObject({ status: 401, code: "webhook_unverified" });
  });
});
