/**
 * Request limits: one default for both modes (wrapped handlers and
 * workflow routes), changed by one option; a body above it is a 413 before
 * anything is claimed.
 */
import { describe, expect, it } from "vitest";
import type { Harness } from "../routes.ts";
import type { BehaviourContext } from "./context.ts";
import { DEFAULT_REQUEST_LIMIT, MIB, SMALL_LIMIT } from "./context.ts";

export function requestLimitBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { effects, uid, newKey, post, rowsFor, ordersFor, expectReplay } = ctx;

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
}
