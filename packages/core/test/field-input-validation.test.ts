/**
 * Field faults of the kind "input validation" (key extraction and key
 * limits): a missing, empty, over-long or malformed key or tenant is refused
 * with 400 invalid_key before any SQL, never stored and never a 500. Keys are
 * case-sensitive and never trimmed. The limit is 255 UTF-8 bytes.
 */
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, InvalidIdempotencyKeyError, workflow } from "../src/index.ts";
import { countIdempoRows, countRuns, rejectionOf, useLoggedDb } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const logged = useLoggedDb(t);
const payments = new FakePayments();
const { workflow: checkout, counters } = makeCheckout(payments);
const input = { cartId: "c1", amountCents: 500 };
let engine: Engine;

beforeAll(() => {
  engine = createEngine({ db: logged.db, leaseMs: 1000 });
});

const call = (key: unknown, tenantId: unknown = "t1") =>
  engine.runOnce(checkout, { tenantId: tenantId as string, key: key as string, input });

/** Refused with invalid_key, with no SQL sent, no row and no phase run; returns the error. */
async function refusedBeforeSql(key: unknown, tenantId: unknown = "t1"): Promise<InvalidIdempotencyKeyError> {
  const rows = await countIdempoRows(t.db);
  const ran = counters.create_order;
  const sent = logged.queries.length;
  const error = await rejectionOf(call(key, tenantId));
  expect(error).toBeInstanceOf(InvalidIdempotencyKeyError);
  expect(error).toMatchObject({ code: "invalid_key", httpStatus: 400 });
  expect(logged.queries.length, "SQL was sent").toBe(sent);
  expect(await countIdempoRows(t.db)).toBe(rows);
  expect(counters.create_order).toBe(ran);
  return error as InvalidIdempotencyKeyError;
}

/** A random key of exactly `n` ASCII characters (high entropy, as in the field report). */
const randomKey = (n: number) => randomBytes(n).toString("base64url").slice(0, n);

describe("input validation: absent, empty and oddly cased keys (BR-18)", () => {
  it.each([
    ["undefined", undefined],
    ["null", null],
    ["''", ""],
    ["only spaces", "   "],
    ["a number", 42],
  ])("a key that is %s is invalid_key before any SQL", async (_what, key) => {
    await refusedBeforeSql(key);
  });

  it("'abc' and 'ABC' are two records: values are case-sensitive", async () => {
    const lower = await call("abc");
    const upper = await call("ABC");
    expect(lower).toMatchObject({ status: 201, replayed: false });
    expect(upper).toMatchObject({ status: 201, replayed: false });
    expect(upper.body).not.toEqual(lower.body);
    expect(await countRuns(t.db, { key: "abc" })).toBe(1);
    expect(await countRuns(t.db, { key: "ABC" })).toBe(1);
  });

  it("a key with surrounding spaces is a different key from the trimmed one, stored verbatim", async () => {
    const trimmed = await call("pad");
    const padded = await call(" pad ");
    expect(padded).toMatchObject({ status: 201, replayed: false });
    expect(padded.body).not.toEqual(trimmed.body);
    expect((await engine.inspect("t1", " pad "))?.key).toBe(" pad ");
    expect(await call(" pad ")).toEqual({ ...padded, replayed: true });
    expect(await call("pad")).toEqual({ ...trimmed, replayed: true });
  });
});

describe("input validation: over-long and malformed keys (BR-19)", () => {
  it("a random 255-character key runs and replays", async () => {
    const key = randomKey(255);
    const first = await call(key);
    expect(first).toMatchObject({ status: 201, replayed: false });
    expect((await engine.inspect("t1", key))?.key).toBe(key);
    expect(await call(key)).toEqual({ ...first, replayed: true });
  });

  it("a random 256-character key is invalid_key before any SQL", async () => {
    expect((await refusedBeforeSql(randomKey(256))).message).toMatch(/255 UTF-8 bytes/);
  });

  // No clock: "fast" is shown by what does not happen. The key is refused on
  // its length before any SQL, so no statement ever carries 100 000 characters.
  it("a 100 000-character key is refused before any SQL", async () => {
    const key = randomKey(100_000);
    expect(await rejectionOf(call(key))).toMatchObject({ code: "invalid_key" });
    await refusedBeforeSql(key);
  });

  it("a 256-character tenant id is invalid_key before any SQL", async () => {
    expect((await refusedBeforeSql("k", "t".repeat(256))).message).toMatch(/tenant id/);
  });

  it.each([
    ["NUL", "k\u0000"],
    ["CR/LF", "k\r\nX-Injected: 1"],
    ["LF", "k\n"],
    ["TAB", "k\tk"],
    ["ESC", "\u001b[31mk"],
    ["DEL", "k\u007f"],
    ["NEL (C1, U+0085)", "k\u0085"],
    ["C1 U+0080", "\u0080k"],
    ["C1 U+009F", "k\u009fk"],
  ])("a key holding %s is invalid_key before any SQL, and the message does not echo it", async (_what, key) => {
    const error = await refusedBeforeSql(key);
    expect(error.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
  });

  it("a tenant id holding a C1 control character (U+0085) is invalid_key before any SQL", async () => {
    expect((await refusedBeforeSql("k", "acme\u0085")).message).toMatch(/^tenant id .*control characters/);
  });

  it("255 emoji (255 characters, 1020 UTF-8 bytes) are refused: the limit counts UTF-8 bytes", async () => {
    const key = "\ud83d\ude00".repeat(255);
    expect(Buffer.byteLength(key, "utf8")).toBe(1020);
    expect((await refusedBeforeSql(key)).message).toMatch(/255 UTF-8 bytes/);
  });

  it("63 emoji (252 UTF-8 bytes) are accepted and stored intact; 64 (256 bytes) are refused", async () => {
    const fits = "\ud83d\udd11".repeat(63);
    expect(await call(fits)).toMatchObject({ status: 201, replayed: false });
    expect((await engine.inspect("t1", fits))?.key).toBe(fits);
    await refusedBeforeSql("\ud83d\udd11".repeat(64));
  });

  it("a 255-character key with a 100-character step name derives a key of at most 255 characters that the provider accepts", async () => {
    const longStep = "charge_".padEnd(100, "x");
    const wf = workflow("w".repeat(100))
      .step(longStep, ({ idempotencyKey }) => ({
        chargeId: payments.charge({ orderId: "o", amountCents: 1 }, idempotencyKey).id,
      }))
      .respond(({ state }) => ({ status: 201, body: state }));
    const key = randomKey(255);
    const tenantId = randomKey(255);
    const callsBefore = payments.calls.length;
    const res = await engine.runOnce(wf, { tenantId, key, input: {} });
    expect(res).toMatchObject({ status: 201, replayed: false, body: { chargeId: expect.any(String) } });
    const sent = payments.calls[callsBefore]?.key ?? "";
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.length).toBeLessThanOrEqual(255);
    expect(sent).not.toContain(key);
  });
});
