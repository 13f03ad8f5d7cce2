/**
 * The behaviour every adapter must show, written once and run against each
 * adapter's real server on loopback: header handling, tenant scoping, the
 * request fingerprint, the status-code table, bodies, and concurrency.
 * Counts come from the handlers' own effects and from idempo's table.
 */
import { randomUUID } from "node:crypto";
import type { RunRecord, TombstoneRecord } from "@idempo/core";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Request, Sent } from "./client.ts";
import { send, sendH2, sendRaw } from "./client.ts";
import { useTestDatabase } from "./database.ts";
import { Effects } from "./effects.ts";
import type { Harness, RunningApp } from "./routes.ts";
import { FAIL_BEFORE_HANDLER } from "./routes.ts";

type Header = readonly [string, string];

const MIB = 1024 * 1024;
/** The default request limit of both modes on every adapter (docs/http.md). */
const DEFAULT_REQUEST_LIMIT = 4 * MIB;
/** The limit the `/wrapped/small` and `/refunds/small` routes set with `maxRequestBytes`. */
const SMALL_LIMIT = 64 * 1024;

export function behaviourSuite(harness: Harness): void {
  const t = useTestDatabase();
  const effects = new Effects();
  let app: RunningApp;

  beforeAll(async () => {
    app = await harness.start({ engine: t.engine, db: t.db, effects });
  });
  afterAll(async () => {
    await app?.close();
  });

  const uid = () => randomUUID().slice(0, 13);
  const newKey = () => `k-${uid()}`;
  const auth = (token = "t1-a"): Header => ["Authorization", `Bearer ${token}`];
  const call = (req: Request) => send(app.url, req);
  const post = (
    path: string,
    key: string | undefined,
    json: unknown,
    opts: { token?: string; headers?: Header[] } = {},
  ) =>
    call({
      path,
      headers: [
        auth(opts.token),
        ...(key === undefined ? [] : [["Idempotency-Key", key] as Header]),
        ...(opts.headers ?? []),
      ],
      json,
    });
  const totalRows = async () =>
    Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs`.execute(t.db)).rows[0]?.n);
  const rowsFor = async (key: string) =>
    Number(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${key}`.execute(t.db)).rows[0]
        ?.n,
    );
  const ordersFor = async (cartId: string) =>
    Number(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE cart_id = ${cartId}`.execute(t.db)).rows[0]
        ?.n,
    );
  /** The parts of a record a refused request must never change. */
  const snapshot = async (tenant: string, key: string) => {
    const r = (await t.engine.inspect(tenant, key)) as RunRecord;
    return {
      runId: r.runId,
      workflow: r.workflow,
      status: r.status,
      ownerToken: r.ownerToken,
      attempt: r.attempt,
      recoveryPoint: r.recoveryPoint,
      input: r.input,
      response: r.response,
      expiresAt: r.expiresAt,
    };
  };

  const expectProblem = (res: Sent, status: number, code: string) => {
    expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status, code });
    expect(res.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(res.json).toMatchObject({ type: `urn:idempo:problem:${code}`, status, code });
  };
  const expectReplay = (first: Sent, again: Sent) => {
    expect(again.status).toBe(first.status);
    expect(again.sha256).toBe(first.sha256);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
  };

  describe(`${harness.name}: the Idempotency-Key header`, () => {
    it("names one record whatever the header name's case, lowercase (as HTTP/2 sends it) included", async () => {
      const key = newKey();
      const tag = uid();
      const first = await post("/wrapped/orders", undefined, { tag }, { headers: [["Idempotency-Key", key]] });
      const lower = await post("/wrapped/orders", undefined, { tag }, { headers: [["idempotency-key", key]] });
      const upper = await post("/wrapped/orders", undefined, { tag }, { headers: [["IDEMPOTENCY-KEY", key]] });
      expect(first.status).toBe(201);
      expectReplay(first, lower);
      expectReplay(first, upper);
      expect(effects.runs(tag)).toBe(1);
      expect(await rowsFor(key)).toBe(1);
    });

    it("takes the RFC 8941 quoted form and the bare form of one value as the same key", async () => {
      const key = newKey();
      const tag = uid();
      const quoted = await post("/wrapped/orders", `"${key}"`, { tag });
      const bare = await post("/wrapped/orders", key, { tag });
      expect(quoted.status).toBe(201);
      expectReplay(quoted, bare);
      const escaped = `q\\"${key}`;
      const withQuote = await post("/wrapped/orders", `"${escaped}"`, { tag: `${tag}-2` });
      const bareQuote = await post("/wrapped/orders", `q"${key}`, { tag: `${tag}-2` });
      expectReplay(withQuote, bareQuote);
      expect(await rowsFor(key)).toBe(1);
      expect(await rowsFor(`q"${key}`)).toBe(1);
    });

    it("keeps values case-sensitive: abc and ABC are two records", async () => {
      const key = `abc-${uid()}`;
      const tag = uid();
      const lower = await post("/wrapped/orders", key, { tag });
      const upper = await post("/wrapped/orders", key.toUpperCase(), { tag });
      expect([lower.status, upper.status]).toEqual([201, 201]);
      expect(upper.headers["idempotent-replayed"]).toBeUndefined();
      expect((lower.json as { orderId: string }).orderId).not.toBe((upper.json as { orderId: string }).orderId);
      expect(effects.runs(tag)).toBe(2);
    });

    const invalid: [string, Header[]][] = [
      ["empty", [["Idempotency-Key", ""]]],
      ["blank, quoted", [["Idempotency-Key", '"   "']]],
      ["a tab inside", [["Idempotency-Key", "a\tb"]]],
      ["non-ASCII bytes", [["Idempotency-Key", "caf\u00e9"]]],
      ["256 characters", [["Idempotency-Key", "k".repeat(256)]]],
      ["10 000 characters", [["Idempotency-Key", "k".repeat(10_000)]]],
      [
        "two header lines",
        [
          ["Idempotency-Key", "a-1"],
          ["Idempotency-Key", "b-1"],
        ],
      ],
      [
        "the same value on two lines",
        [
          ["Idempotency-Key", "a-1"],
          ["idempotency-key", "a-1"],
        ],
      ],
      [
        "two lines that would join into one quoted string",
        [
          ["Idempotency-Key", '"a'],
          ["Idempotency-Key", 'b"'],
        ],
      ],
      ["comma-joined values", [["Idempotency-Key", "a-1, b-1"]]],
      ["a list of quoted strings", [["Idempotency-Key", '"a-1", "b-1"']]],
      ["a parameter", [["Idempotency-Key", '"a-1";v=1']]],
      ["an unterminated quote", [["Idempotency-Key", '"a-1']]],
      ["an invalid escape", [["Idempotency-Key", '"a\\x"']]],
    ];
    // Joined by a Fetch Headers, these two lines are one quoted key with a comma in it: nothing can tell them apart.
    const refused = harness.joinsKeyLines
      ? invalid.filter(([what]) => !what.startsWith("two lines that would join"))
      : invalid;
    it.each(refused)("refuses %s with 400 invalid_key, before the handler and without a row", async (_what, lines) => {
      const tag = uid();
      const before = await totalRows();
      const res = await post("/wrapped/orders", undefined, { tag }, { headers: lines });
      expectProblem(res, 400, "invalid_key");
      expect(JSON.stringify(res.json)).not.toContain("caf");
      expect(effects.runs(tag)).toBe(0);
      expect(await totalRows()).toBe(before);
    });

    it("refuses control characters that reach the server raw, and keys beyond the header size limit, with a 4xx", async () => {
      const before = await totalRows();
      const body = '{"tag":"raw"}';
      const head = (key: string) =>
        `POST /wrapped/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1-a\r\nIdempotency-Key: ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
      expect(await sendRaw(app.url, head("a\u0001b"))).toBe(400);
      expect(await sendRaw(app.url, head("a\u007fb"))).toBe(400);
      // Refused on the header size, never read into a key: a status, not a clock, says so.
      const huge = await sendRaw(app.url, head("k".repeat(100_000)));
      expect([400, 431]).toContain(huge);
      expect(effects.runs("raw")).toBe(0);
      expect(await totalRows()).toBe(before);
    });

    it("without a key: 400 key_missing where required; elsewhere the request passes through untouched", async () => {
      const tag = uid();
      const before = await totalRows();
      expectProblem(await post("/wrapped/orders", undefined, { tag }), 400, "key_missing");
      expectProblem(await post("/orders", undefined, { cartId: tag, amountCents: 5 }), 400, "key_missing");
      expect(effects.runs(tag)).toBe(0);
      const ids = new Set<string>();
      for (let i = 0; i < 3; i++) {
        const res = await post("/wrapped/optional", undefined, { tag });
        expect(res.status).toBe(201);
        expect(res.headers["idempotent-replayed"]).toBeUndefined();
        ids.add((res.json as { orderId: string }).orderId);
      }
      expect(ids.size).toBe(3);
      expect(effects.runs(tag)).toBe(3);
      expect(await totalRows()).toBe(before);
    });

    it.runIf(harness.http2)("works over cleartext HTTP/2, where header names are lower case", async () => {
      const h2 = await harness.start({ engine: t.engine, db: t.db, effects }, { http2: true });
      try {
        const key = newKey();
        const tag = uid();
        const req = { path: "/wrapped/orders", headers: [auth(), ["idempotency-key", key] as Header], json: { tag } };
        const first = await sendH2(h2.url, req);
        const again = await sendH2(h2.url, req);
        expect(first.status).toBe(201);
        expectReplay(first, again);
        expect(effects.runs(tag)).toBe(1);
      } finally {
        await h2.close();
      }
    });
  });

  describe(`${harness.name}: tenants`, () => {
    it("scopes keys by tenant: no cross-tenant replay, no cross-tenant blocking, one tenant across credentials", async () => {
      const key = newKey();
      const c1 = { cartId: `c1-${uid()}`, amountCents: 500 };
      const t1 = await post("/orders", key, c1, { token: "t1-a" });
      const t2 = await post("/orders", key, c1, { token: "t2" });
      expect([t1.status, t2.status]).toEqual([201, 201]);
      expect(t2.headers["idempotent-replayed"]).toBeUndefined();
      const o1 = (t1.json as { orderId: string }).orderId;
      expect((t2.json as { orderId: string }).orderId).not.toBe(o1);
      // Compared against t2's own record only.
      expectProblem(await post("/orders", key, { ...c1, cartId: `c2-${uid()}` }, { token: "t2" }), 422, "key_mismatch");
      const other = await post("/orders", key, c1, { token: "t1-b" });
      expectReplay(t1, other);
      expect((other.json as { orderId: string }).orderId).toBe(o1);
      expect(await ordersFor(c1.cartId)).toBe(2);

      const [r1, r2] = await Promise.all([t.engine.inspect("t1", key), t.engine.inspect("t2", key)]);
      const derived = (r: RunRecord | TombstoneRecord | null) =>
        r?.history?.find((h) => h.name === "charge")?.derivedKey;
      expect(derived(r1)).toBeTruthy();
      expect(derived(r1)).not.toBe(derived(r2));
      const page = await t.engine.listKeys({ tenantId: "t1", limit: 1000 });
      expect(page.items.every((r) => r.tenantId === "t1")).toBe(true);
    });

    it("does not make one tenant wait on another's key in flight", async () => {
      const key = newKey();
      const gate = `g-${uid()}`;
      const held = post("/orders", key, { cartId: `h-${uid()}`, amountCents: 500, gate }, { token: "t1-a" });
      await effects.gate(gate).reached();
      const t2 = await post("/orders", key, { cartId: `h-${uid()}`, amountCents: 500 }, { token: "t2" });
      expect(t2.status).toBe(201);
      effects.gate(gate).open();
      expect((await held).status).toBe(201);
    });

    it.each([
      ["no credentials", undefined],
      ["a credential with no tenant", "unknown"],
      ["an empty tenant", "empty"],
    ])("refuses a request with %s: 400 invalid_key, no row, no run", async (_what, token) => {
      const key = newKey();
      const tag = uid();
      const headers: Header[] = [
        ["Idempotency-Key", key],
        ...(token ? [["Authorization", `Bearer ${token}`] as Header] : []),
      ];
      expectProblem(
        await call({ path: "/orders", headers, json: { cartId: tag, amountCents: 5 } }),
        400,
        "invalid_key",
      );
      expectProblem(await call({ path: "/wrapped/orders", headers, json: { tag } }), 400, "invalid_key");
      expect(effects.runs(tag)).toBe(0);
      expect(await rowsFor(key)).toBe(0);
    });
  });

  describe(`${harness.name}: the request fingerprint`, () => {
    it("ignores key order, whitespace and number spelling (JCS), on both kinds of route", async () => {
      for (const path of ["/orders", "/wrapped/orders"]) {
        const key = newKey();
        const tag = uid();
        const first = await post(path, key, `{"amountCents":100,"cartId":"${tag}","tag":"${tag}"}`);
        const again = await post(path, key, ` { "tag" : "${tag}",\n "cartId":"${tag}", "amountCents": 100.0 } `);
        expect(first.status).toBe(201);
        expectReplay(first, again);
        expect(effects.runs(tag)).toBe(1);
      }
    });

    it("compares the parsed value, never the escaping, and never normalises Unicode", async () => {
      const key = newKey();
      const escaped = await post("/wrapped/orders", key, '{"tag":"caf\\u00e9"}');
      const raw = await post("/wrapped/orders", key, '{"tag":"caf\u00e9"}');
      expect(escaped.status).toBe(201);
      expectReplay(escaped, raw);
      const before = await snapshot("t1", key);
      expectProblem(await post("/wrapped/orders", key, '{"tag":"cafe\\u0301"}'), 422, "key_mismatch");
      expect(await snapshot("t1", key)).toEqual(before);
      expect(effects.runs("cafe\u0301")).toBe(0);
    });

    it("refuses a lone surrogate with 400 invalid_input before anything is claimed", async () => {
      const key = newKey();
      expectProblem(await post("/wrapped/orders", key, '{"tag":"\\ud800"}'), 400, "invalid_input");
      expectProblem(await post("/orders", key, '{"cartId":"\\ud800","amountCents":5}'), 400, "invalid_input");
      expect(await rowsFor(key)).toBe(0);
    });

    it("answers 422 for the same key on another route, and runs nothing there", async () => {
      const key = newKey();
      const body = { cartId: `c-${uid()}`, amountCents: 700 };
      expect((await post("/orders", key, body)).status).toBe(201);
      const before = await snapshot("t1", key);
      expectProblem(await post("/refunds", key, body), 422, "key_mismatch");
      expect(effects.runs(`refund:${body.cartId}`)).toBe(0);
      expect(await snapshot("t1", key)).toEqual(before);

      const wrapped = newKey();
      const tag = uid();
      expect((await post("/wrapped/orders", wrapped, { tag })).status).toBe(201);
      expectProblem(await post("/wrapped/optional", wrapped, { tag }), 422, "key_mismatch");
      expectProblem(await post("/wrapped/orders?x=1", wrapped, { tag }), 422, "key_mismatch");
      expect(effects.runs(tag)).toBe(1);
    });

    it("answers 422 for the same key on another resource (the path parameter is fingerprinted)", async () => {
      const key = newKey();
      const a = `o-${uid()}`;
      const b = `o-${uid()}`;
      const first = await call({ method: "DELETE", path: `/orders/${a}`, headers: [auth(), ["Idempotency-Key", key]] });
      expect(first.status).toBe(204);
      const other = await call({ method: "DELETE", path: `/orders/${b}`, headers: [auth(), ["Idempotency-Key", key]] });
      expectProblem(other, 422, "key_mismatch");
      expect(effects.runs(`cancel:${b}`)).toBe(0);

      const wrapped = newKey();
      const w1 = await call({
        method: "DELETE",
        path: `/wrapped/orders/${a}`,
        headers: [auth(), ["Idempotency-Key", wrapped]],
      });
      const w2 = await call({
        method: "DELETE",
        path: `/wrapped/orders/${b}`,
        headers: [auth(), ["Idempotency-Key", wrapped]],
      });
      expect(w1.status).toBe(204);
      expectProblem(w2, 422, "key_mismatch");
      expect([effects.runs(`delete:${a}`), effects.runs(`delete:${b}`)]).toEqual([1, 0]);
    });

    it("hashes the bytes of other media types", async () => {
      const key = newKey();
      const bytes = Buffer.from(`raw-${uid()}\u0000\u00ff`, "latin1");
      const octet: Header = ["Content-Type", "application/octet-stream"];
      const first = await call({
        path: "/wrapped/raw",
        headers: [auth(), ["Idempotency-Key", key], octet],
        body: bytes,
      });
      const again = await call({
        path: "/wrapped/raw",
        headers: [auth(), ["Idempotency-Key", key], octet],
        body: bytes,
      });
      expect(first.status).toBe(200);
      expect(first.json).toEqual({ length: bytes.length });
      expectReplay(first, again);
      const changed = Buffer.from(bytes);
      changed[0] = 0x52;
      const other = await call({
        path: "/wrapped/raw",
        headers: [auth(), ["Idempotency-Key", key], octet],
        body: changed,
      });
      expectProblem(other, 422, "key_mismatch");
    });

    it("refuses a JSON body that does not parse with 400, before the handler and without a row", async () => {
      const key = newKey();
      const res = await post("/wrapped/orders", key, '{"tag": "broken"');
      expect(res.status).toBe(400);
      expect(effects.runs("broken")).toBe(0);
      expect(await rowsFor(key)).toBe(0);
    });
  });

  describe(`${harness.name}: the status-code table`, () => {
    it("409 with Retry-After while in flight, 422 for another body, replay after; no refusal changes the record", async () => {
      const key = newKey();
      const gate = `g-${uid()}`;
      const body = { cartId: `br10-${uid()}`, amountCents: 500, gate };
      const a = post("/orders", key, body);
      await effects.gate(gate).reached();
      const inFlight = await snapshot("t1", key);
      const b = await post("/orders", key, body);
      expectProblem(b, 409, "key_in_progress");
      expect(Number(b.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      expect(Number(b.headers["retry-after"])).toBeLessThanOrEqual(3);
      expectProblem(await post("/orders", key, { ...body, amountCents: 999 }), 422, "key_mismatch");
      expectProblem(await post("/orders", key, body), 409, "key_in_progress");
      expect(await snapshot("t1", key)).toEqual(inFlight);
      effects.gate(gate).open();
      const first = await a;
      expect(first.status).toBe(201);
      expect(first.headers.location).toBe(`/orders/${(first.json as { orderId: string }).orderId}`);
      const done = await snapshot("t1", key);
      expectProblem(await post("/orders", key, { ...body, amountCents: 999 }), 422, "key_mismatch");
      const again = await post("/orders", key, body);
      expectReplay(first, again);
      expect(again.headers.location).toBe(first.headers.location);
      expectProblem(await post("/orders", key, { ...body, amountCents: -1 }), 400, "invalid_input");
      expectProblem(await post("/orders", `${key}\tx`, body), 400, "invalid_key");
      expectProblem(await post("/orders", key, body, { token: "empty" }), 400, "invalid_key");
      expect(await snapshot("t1", key)).toEqual(done);
      expect(effects.runs(body.cartId)).toBe(1);
      expect(await ordersFor(body.cartId)).toBe(1);
    });

    it("409 with Retry-After while a wrapped handler runs", async () => {
      const key = newKey();
      const gate = `g-${uid()}`;
      const a = post("/wrapped/orders", key, { tag: gate, gate });
      await effects.gate(gate).reached();
      const b = await post("/wrapped/orders", key, { tag: gate, gate });
      expectProblem(b, 409, "key_in_progress");
      expect(Number(b.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      effects.gate(gate).open();
      const first = await a;
      expect(first.status).toBe(201);
      expect(effects.runs(gate)).toBe(1);
    });

    it("stores and replays a ctx.fail answer; a ctx.reject answer is not stored", async () => {
      const declined = newKey();
      const body = { cartId: `d-${uid()}`, amountCents: 402 };
      const first = await post("/orders", declined, body);
      expect(first.status).toBe(402);
      expect(first.json).toMatchObject({ code: "card_declined" });
      expectReplay(first, await post("/orders", declined, body));

      const rejected = newKey();
      const refused = await post("/orders", rejected, { cartId: "reject", amountCents: 5 });
      expect(refused.status).toBe(409);
      expect(refused.json).toEqual({ code: "cart_locked" });
      expect(await rowsFor(rejected)).toBe(0);
      expect((await post("/orders", rejected, { cartId: `ok-${uid()}`, amountCents: 5 })).status).toBe(201);
    });

    it("400 invalid_input stores nothing, so the corrected request runs under the same key", async () => {
      const key = newKey();
      const cartId = `v-${uid()}`;
      expectProblem(await post("/orders", key, { cartId, amountCents: -5 }), 400, "invalid_input");
      expectProblem(await post("/orders", key, { cartId, amountCents: -5 }), 400, "invalid_input");
      expect(await rowsFor(key)).toBe(0);
      expect((await post("/orders", key, { cartId, amountCents: 500 })).status).toBe(201);
    });

    it("releases the key for statuses storeResponse declines", async () => {
      const key = newKey();
      const tag = uid();
      expect((await post("/wrapped/validate", key, { tag, amount: -1 })).status).toBe(400);
      expect(await rowsFor(key)).toBe(0);
      const ok = await post("/wrapped/validate", key, { tag, amount: 5 });
      expect(ok.status).toBe(201);
      expectReplay(ok, await post("/wrapped/validate", key, { tag, amount: 5 }));
      expect(effects.runs(tag)).toBe(2);
    });

    it("stores a handler's own error answer like any other, so a retry does not run it again", async () => {
      const key = newKey();
      const tag = uid();
      const first = await post("/wrapped/answers-500", key, { tag });
      expect(first.status).toBe(500);
      expectReplay(first, await post("/wrapped/answers-500", key, { tag }));
      expect(effects.runs(tag)).toBe(1);
    });

    it("never stores a thrown error: the error handler's answer goes out, the key is released", async () => {
      const key = newKey();
      const tag = uid();
      const first = await post("/wrapped/fail", key, { tag });
      expect(first.status).toBe(500);
      expect(await rowsFor(key)).toBe(0);
      const again = await post("/wrapped/fail", key, { tag });
      expect(again.status).toBe(500);
      expect(again.headers["idempotent-replayed"]).toBeUndefined();
      expect(effects.runs(tag)).toBe(2);
    });

    it("409 lease_lost for an attempt that was taken over while its handler ran", async () => {
      const key = newKey();
      const gate = `g-${uid()}`;
      const body = { tag: gate, gate };
      const a = post("/wrapped/orders", key, body);
      await effects.gate(gate).reached(1);
      let b: Promise<Sent> | undefined;
      for (let tries = 0; tries < 5 && !b; tries++) {
        await t.engine.release("t1", key);
        const attempt = post("/wrapped/orders", key, body);
        // Either B takes over (and waits at the gate) or A's heartbeat renewed the lease first (409).
        const winner = await Promise.race([
          attempt,
          effects
            .gate(gate)
            .reached(2)
            .then(() => undefined),
        ]);
        if (winner === undefined) b = attempt;
        else expect(winner.status).toBe(409);
      }
      expect(b).toBeDefined();
      effects.gate(gate).open();
      const [first, second] = await Promise.all([a, b as Promise<Sent>]);
      expectProblem(first, 409, "lease_lost");
      expect(second.status).toBe(201);
      expect(second.json).toMatchObject({ attempt: 2 });
      // The handler ran twice: a wrapped handler's effects are not fenced (use a workflow for that).
      expect(effects.runs(gate)).toBe(2);
      expectReplay(second, await post("/wrapped/orders", key, body));
    });

    it("413 for a request body above the limit, before the handler runs", async () => {
      const key = newKey();
      const tag = uid();
      const res = await post("/wrapped/small", key, { tag, pad: "p".repeat(SMALL_LIMIT) });
      expect(res.status).toBe(413);
      // Without a Content-Length, the limit applies while the body is read.
      const chunked = await call({
        path: "/wrapped/small",
        headers: [auth(), ["Idempotency-Key", key], ["Content-Type", "application/json"]],
        body: JSON.stringify({ tag, pad: "p".repeat(SMALL_LIMIT) }),
        chunked: true,
      });
      expect(chunked.status).toBe(413);
      expect((await post("/wrapped/orders", newKey(), { tag: `${tag}-after` })).status).toBe(201);
      expect(effects.runs(tag)).toBe(0);
      expect(await rowsFor(key)).toBe(0);
    });

    it("a response above the cap completes the key with a stored 500 response_too_large; the retry does not run again", async () => {
      const key = newKey();
      const tag = uid();
      const first = await post("/wrapped/capped", key, { tag, size: 2 * MIB });
      expectProblem(first, 500, "response_too_large");
      expect(first.json).toMatchObject({ handlerStatus: 200 });
      expectReplay(first, await post("/wrapped/capped", key, { tag, size: 2 * MIB }));
      expect(effects.runs(tag)).toBe(1);
      expect((await t.engine.inspect("t1", key))?.status).toBe("completed");
    });
  });

  describe(`${harness.name}: bodies`, () => {
    const twice = async (path: string, json: unknown, method = "POST") => {
      const key = newKey();
      const req = { method, path, headers: [auth(), ["Idempotency-Key", key] as Header], json };
      return [await call(req), await call(req)] as const;
    };

    it("replays binary bodies byte for byte, with content-type and content-disposition", async () => {
      const tag = uid();
      const [first, again] = await twice("/wrapped/binary", { tag });
      expect(first.status).toBe(200);
      expect(first.body.length).toBe(1024);
      expect(first.body[255]).toBe((255 * 7) % 256);
      expectReplay(first, again);
      expect(again.headers["content-type"]).toBe("application/octet-stream");
      expect(again.headers["content-disposition"]).toBe('attachment; filename="blob.bin"');
      expect(effects.runs(tag)).toBe(1);
    });

    it("replays text byte for byte (a byte-order mark, U+2028 and an emoji included)", async () => {
      const [first, again] = await twice("/wrapped/text", { tag: uid() });
      expect(first.body.toString("utf8")).toBe("\ufeffhéllo ✓\u2028 wörld 😀\n");
      expectReplay(first, again);
      expect(again.headers["content-type"]).toBe(first.headers["content-type"]);
    });

    it("replays a 204 without a body", async () => {
      const id = `o-${uid()}`;
      const [first, again] = await twice(`/wrapped/orders/${id}`, undefined, "DELETE");
      expect(first.status).toBe(204);
      expect(again.body.length).toBe(0);
      expectReplay(first, again);
      expect(effects.runs(`delete:${id}`)).toBe(1);
    });

    it("buffers a streamed body and replays it whole", async () => {
      const tag = uid();
      const [first, again] = await twice("/wrapped/stream", { tag });
      expect(first.body.toString()).toBe("one,two,three");
      expectReplay(first, again);
      expect(effects.runs(tag)).toBe(1);
    });

    it("stores a 5 MiB response to a 2 MiB request when the caps allow it, and replays the same bytes", async () => {
      const tag = uid();
      const [first, again] = await twice("/wrapped/large", { tag, size: 5 * MIB, blob: "b".repeat(2 * MIB) });
      expect(first.status).toBe(200);
      expect(first.body.length).toBeGreaterThan(5 * MIB);
      expectReplay(first, again);
      expect(again.headers["content-type"]).toBe(first.headers["content-type"]);
      expect(effects.runs(tag)).toBe(1);
    });

    it("replays only allow-listed headers: never set-cookie", async () => {
      const [first, again] = await twice("/wrapped/orders", { tag: uid() });
      expect(first.headers["set-cookie"]).toEqual(["session=s1; Path=/", "seen=1"]);
      expect(first.headers["x-custom"]).toBe("yes");
      expectReplay(first, again);
      expect(again.headers.location).toBe(first.headers.location);
      expect(again.headers["content-type"]).toBe(first.headers["content-type"]);
      expect(again.headers["set-cookie"]).toBeUndefined();
      expect(again.headers["x-custom"]).toBeUndefined();
    });
  });

  describe(`${harness.name}: request limits (one default for both modes, one option)`, () => {
    it("a 2 MiB request runs once and replays under the default request limit, on a wrapped route and on a workflow route", async () => {
      const blob = "b".repeat(2 * MIB);
      const tag = uid();
      const wrapKey = newKey();
      const wrapped = await post("/wrapped/orders", wrapKey, { tag, blob });
      expect(wrapped.status).toBe(201);
      expectReplay(wrapped, await post("/wrapped/orders", wrapKey, { tag, blob }));
      expect(effects.runs(tag)).toBe(1);

      const cartId = `big-${uid()}`;
      const flowKey = newKey();
      const flow = await post("/orders", flowKey, { cartId, amountCents: 100, blob });
      expect(flow.status).toBe(201);
      expectReplay(flow, await post("/orders", flowKey, { cartId, amountCents: 100, blob }));
      expect(effects.runs(cartId)).toBe(1);
      expect(await ordersFor(cartId)).toBe(1);
    });

    it("a workflow route refuses a body above the default with 413: nothing is claimed, runs.input never holds it", async () => {
      const key = newKey();
      const cartId = `huge-${uid()}`;
      // A field the schema strips: only the limit keeps it out of the stored input.
      const res = await post("/orders", key, { cartId, amountCents: 100, junk: "j".repeat(10 * MIB) });
      expect(res.status).toBe(413);
      expect(await rowsFor(key)).toBe(0);
      expect(effects.runs(cartId)).toBe(0);
      const justOver = await post("/refunds", newKey(), {
        cartId,
        amountCents: 1,
        junk: "j".repeat(DEFAULT_REQUEST_LIMIT),
      });
      expect(justOver.status).toBe(413);
    });

    it("maxRequestBytes changes the limit of either mode", async () => {
      const cartId = `small-${uid()}`;
      const pad = "p".repeat(SMALL_LIMIT);
      const key = newKey();
      expect((await post("/refunds/small", key, { cartId, amountCents: 1, pad })).status).toBe(413);
      expect(await rowsFor(key)).toBe(0);
      expect((await post("/refunds/small", newKey(), { cartId, amountCents: 1 })).status).toBe(201);
      expect((await post("/wrapped/small", newKey(), { tag: uid(), pad })).status).toBe(413);
      expect(effects.runs(`refund:${cartId}`)).toBe(1);
    });
  });

  describe.runIf(harness.mounts !== false)(
    `${harness.name}: answers that are never stored (middleware mounted in front of the routes)`,
    () => {
      it("stores and replays what a handler answered behind it", async () => {
        const key = newKey();
        const tag = uid();
        const first = await post("/mounted/orders", key, { tag });
        expect(first.status).toBe(201);
        expectReplay(first, await post("/mounted/orders", key, { tag }));
        expect(effects.runs(tag)).toBe(1);
      });

      it("a request to a route that does not exist is not claimed, stored or replayed", async () => {
        const key = newKey();
        const first = await post("/mounted/no-such-route", key, { tag: uid() });
        expect(first.status).toBe(404);
        expect(await rowsFor(key)).toBe(0);
        const again = await post("/mounted/no-such-route", key, { tag: uid() });
        expect(again.status).toBe(404);
        expect(again.headers["idempotent-replayed"]).toBeUndefined();
        expect(await rowsFor(key)).toBe(0);
      });

      it("a handler that throws: the framework's error answer is sent, not stored, and the retry runs the handler", async () => {
        const key = newKey();
        const tag = uid();
        const first = await post("/mounted/fail", key, { tag });
        expect(first.status).toBe(500);
        expect(await rowsFor(key)).toBe(0);
        const again = await post("/mounted/fail", key, { tag });
        expect(again.status).toBe(500);
        expect(again.headers["idempotent-replayed"]).toBeUndefined();
        expect(effects.runs(tag)).toBe(2);
      });

      it("a middleware that fails before the handler: nothing stored, the same key then runs the handler", async () => {
        const key = newKey();
        const tag = uid();
        const failed = await post("/mounted/orders", key, { tag }, { headers: [[FAIL_BEFORE_HANDLER, "1"]] });
        expect(failed.status).toBe(500);
        expect(failed.body.toString("utf8")).not.toMatch(/idempotent/i);
        expect(effects.runs(tag)).toBe(0);
        expect(await rowsFor(key)).toBe(0);
        const ok = await post("/mounted/orders", key, { tag });
        expect(ok.status).toBe(201);
        expect(ok.headers["idempotent-replayed"]).toBeUndefined();
        expectReplay(ok, await post("/mounted/orders", key, { tag }));
        expect(effects.runs(tag)).toBe(1);
      });
    },
  );

  describe(`${harness.name}: concurrency`, () => {
    const storm = async (path: string, key: string, json: unknown) => {
      let go!: () => void;
      const barrier = new Promise<void>((r) => {
        go = r;
      });
      const all = Array.from({ length: 25 }, () => barrier.then(() => post(path, key, json)));
      go();
      return Promise.all(all);
    };

    it("25 simultaneous first requests for one key: one execution, the rest 409 or replay, no 5xx", async () => {
      for (let round = 0; round < 3; round++) {
        const key = newKey();
        const cartId = `race-${uid()}`;
        const body = { cartId, amountCents: 500, sleepMs: 200 };
        const results = await storm("/orders", key, body);
        const executed = results.filter((r) => r.status === 201 && r.headers["idempotent-replayed"] === undefined);
        expect(executed).toHaveLength(1);
        for (const r of results) {
          if (r === executed[0]) continue;
          if (r.status === 409) {
            expect((r.json as { code: string }).code).toBe("key_in_progress");
            expect(r.headers["retry-after"]).toBeDefined();
          } else {
            expect(r.status).toBe(201);
            expect(r.sha256).toBe(executed[0]?.sha256);
          }
        }
        expectReplay(executed[0] as Sent, await post("/orders", key, body));
        expect(effects.runs(cartId)).toBe(1);
        expect(await ordersFor(cartId)).toBe(1);
        expect(await rowsFor(key)).toBe(1);
        const record = await t.engine.inspect("t1", key);
        const derived = record?.history?.find((h) => h.name === "charge")?.derivedKey as string;
        expect(effects.payments.calls.filter((c) => c.key === derived)).toHaveLength(1);
      }
    });

    it("25 simultaneous first requests to a wrapped handler: it runs once", async () => {
      const key = newKey();
      const tag = uid();
      const results = await storm("/wrapped/orders", key, { tag });
      expect(results.filter((r) => r.status >= 500)).toEqual([]);
      expect(results.filter((r) => r.status === 201 && r.headers["idempotent-replayed"] === undefined)).toHaveLength(1);
      expect(results.every((r) => r.status === 201 || r.status === 409)).toBe(true);
      expect(effects.runs(tag)).toBe(1);
    });
  });
}
