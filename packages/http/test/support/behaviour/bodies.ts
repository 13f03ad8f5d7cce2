/**
 * Replayed bodies: binary, text, empty and streamed bodies come back byte
 * for byte, with only the allow-listed headers.
 */
import { describe, expect, it } from "vitest";
import type { Harness } from "../routes.ts";
import type { BehaviourContext, Header } from "./context.ts";
import { MIB } from "./context.ts";

export function bodyBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { effects, uid, newKey, auth, call, expectReplay } = ctx;

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
}
