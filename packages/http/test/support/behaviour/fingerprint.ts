/**
 * The request fingerprint: the canonical JSON (JCS) of the body, the route
 * and its path parameters, or the bytes of other media types; a retry that
 * differs is a 422 that changes nothing.
 */
import { describe, expect, it } from "vitest";
import type { Harness } from "../routes.ts";
import type { BehaviourContext, Header } from "./context.ts";

export function fingerprintBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { effects, uid, newKey, auth, call, post, rowsFor, snapshot, expectProblem, expectReplay } = ctx;

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
}
