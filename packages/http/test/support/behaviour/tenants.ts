/**
 * Tenant scoping: the same key in two tenants is two records that neither
 * replay nor block each other, and a request without a tenant is refused.
 */
import type { RunRecord, TombstoneRecord } from "@idempo/core";
import { describe, expect, it } from "vitest";
import type { Harness } from "../routes.ts";
import type { BehaviourContext, Header } from "./context.ts";

export function tenantBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { t, effects, uid, newKey, call, post, rowsFor, ordersFor, expectProblem, expectReplay } = ctx;

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
}
