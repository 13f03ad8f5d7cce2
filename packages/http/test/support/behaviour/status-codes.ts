/**
 * The status-code table: 409 with Retry-After while in flight, 422 for
 * another body, replays after; which answers are stored (ctx.fail, a
 * handler's own error) and which release the key (ctx.reject, a thrown
 * error, declined statuses); lease_lost, and the size limits.
 */
import { describe, expect, it } from "vitest";
import type { Sent } from "../client.ts";
import type { Harness } from "../routes.ts";
import type { BehaviourContext } from "./context.ts";
import { MIB, SMALL_LIMIT } from "./context.ts";

export function statusCodeBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { t, effects, uid, newKey, auth, call, post, rowsFor, ordersFor, snapshot, expectProblem, expectReplay } = ctx;

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
}
