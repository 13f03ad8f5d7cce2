/**
 * Answers that are never stored, with the middleware mounted in front of the
 * routes: a route that does not exist, a handler that throws, a middleware
 * that fails before the handler.
 */
import { describe, expect, it } from "vitest";
import type { Harness } from "../routes.ts";
import { FAIL_BEFORE_HANDLER } from "../routes.ts";
import type { BehaviourContext } from "./context.ts";

export function unstoredAnswerBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { effects, uid, newKey, post, rowsFor, expectReplay } = ctx;

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
}
