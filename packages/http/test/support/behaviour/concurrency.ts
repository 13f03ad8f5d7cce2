/**
 * Concurrency: 25 simultaneous first requests for one key run the work once;
 * the rest get 409 or the replay, never a 5xx.
 */
import { describe, expect, it } from "vitest";
import type { Sent } from "../client.ts";
import type { Harness } from "../routes.ts";
import type { BehaviourContext } from "./context.ts";

export function concurrencyBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { t, effects, uid, newKey, post, rowsFor, ordersFor, expectReplay } = ctx;

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
