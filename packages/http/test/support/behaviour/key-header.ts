/**
 * The Idempotency-Key header: names one record whatever its case or
 * quoting, keeps values case-sensitive, and refuses malformed, repeated or
 * missing keys before the handler runs and without a row.
 */
import { describe, expect, it } from "vitest";
import { sendH2, sendRaw } from "../client.ts";
import type { Harness } from "../routes.ts";
import type { BehaviourContext, Header } from "./context.ts";

export function keyHeaderBehaviour(harness: Harness, ctx: BehaviourContext): void {
  const { t, effects, app, uid, newKey, auth, post, totalRows, rowsFor, expectProblem, expectReplay } = ctx;

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
}
