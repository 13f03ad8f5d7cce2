/**
 * Field faults of the kind "canonicalization": a retry of the same intent
 * must get the same fingerprint however its JSON was spelled (key order,
 * escapes), and different intents must never share one (case-distinct keys,
 * array order, Unicode normal forms). Canonical bytes never depend on the
 * process locale.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  IdempotencyKeyMismatchError,
  InputValidationError,
  UnstorableValueError,
  workflow,
} from "../src/index.ts";
import { requestFingerprint } from "../src/json/fingerprint.ts";
import { countRuns, rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
let engine: Engine;
const calls = new Map<string, number>();

/** Accepts any JSON; counts runs per key; responds 201 {n, input}. */
const echo = workflow("echo")
  .phase("count", ({ key }) => {
    calls.set(key, (calls.get(key) ?? 0) + 1);
    return {};
  })
  .respond(({ key, input }) => ({ status: 201, body: { n: calls.get(key), input } }));

const createCustomer = workflow("create_customer")
  .input(z.object({ name: z.string() }))
  .phase("insert_customer", async ({ tx, tenantId, input }) => {
    const { rows } = await sql<{ id: number }>`
      INSERT INTO customers (tenant_id, name) VALUES (${tenantId}, ${input.name}) RETURNING id`.execute(tx);
    return { id: rows[0]?.id ?? 0 };
  })
  .respond(({ state, input }) => ({ status: 201, body: { id: state.id, name: input.name } }));

beforeAll(async () => {
  engine = createEngine({ db: t.db, leaseMs: 1000 });
  await sql`CREATE TABLE customers (id serial PRIMARY KEY, tenant_id text NOT NULL, name text NOT NULL)`.execute(t.db);
});

const run = (key: string, input: unknown, wf: typeof echo = echo) =>
  engine.runOnce(wf, { tenantId: "t1", key, input: input as never });

async function customers(): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT name FROM customers ORDER BY id`.execute(t.db);
  return rows.map((r) => r.name);
}

/** RFC 8785 §3.2.3 sorting example, inserted in a non-canonical order. */
const RFC_KEYS_INPUT = {
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis",
};
const RFC_CANONICAL =
  '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
  '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}';

describe("canonicalization: key order and key case (BR-01)", () => {
  it("replays a retry whose object keys arrive in another order, at every depth", async () => {
    const first = await run("k1", { amount: 100, currency: "eur", meta: { b: 1, a: 2 } });
    const again = await run("k1", { meta: { a: 2, b: 1 }, currency: "eur", amount: 100.0 });
    expect(first.replayed).toBe(false);
    expect(again.replayed).toBe(true);
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(calls.get("k1")).toBe(1);
  });

  it("replays {a:1, A:2} against {A:2, a:1}: case-distinct keys sort by code unit, never case-folded", async () => {
    const first = await run("k2", { a: 1, A: 2 });
    const again = await run("k2", { A: 2, a: 1 });
    expect(again).toEqual({ ...first, replayed: true });
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(calls.get("k2")).toBe(1);
    // And the values really are bound to their own keys.
    expect(await rejectionOf(run("k2", { a: 2, A: 1 }))).toBeInstanceOf(IdempotencyKeyMismatchError);
  });

  it("answers 422 to a retry whose array order differs, leaving the record unchanged", async () => {
    await run("k3", { items: [1, 2] });
    const before = await engine.inspect("t1", "k3");
    const error = await rejectionOf(run("k3", { items: [2, 1] }));
    expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(error).toMatchObject({ code: "key_mismatch", httpStatus: 422 });
    expect(await engine.inspect("t1", "k3")).toEqual(before);
    expect(calls.get("k3")).toBe(1);
  });

  it("replays the RFC 8785 sorting example whatever the insertion order (emoji before U+FB33)", async () => {
    const first = await run("k4", RFC_KEYS_INPUT);
    const reversed = Object.fromEntries(Object.entries(RFC_KEYS_INPUT).reverse());
    const again = await run("k4", reversed);
    expect(again.replayed).toBe(true);
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(calls.get("k4")).toBe(1);
  });

  it("canonicalises the RFC 8785 sorting example identically under LC_ALL=C, tr_TR.UTF-8 and de_DE.UTF-8", () => {
    const fingerprintModule = fileURLToPath(new URL("../src/json/fingerprint.ts", import.meta.url));
    const script = `
      import canonicalize from "canonicalize";
      import { requestFingerprint } from ${JSON.stringify(fingerprintModule)};
      const input = ${JSON.stringify(RFC_KEYS_INPUT)};
      process.stdout.write(JSON.stringify({
        locale: new Intl.Collator().resolvedOptions().locale,
        canonical: canonicalize(input),
        fingerprint: requestFingerprint("echo", input),
      }));`;
    const results = ["C", "tr_TR.UTF-8", "de_DE.UTF-8"].map((locale) => {
      const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        env: { ...process.env, LC_ALL: locale, LANG: locale },
        encoding: "utf8",
      });
      return JSON.parse(out) as { locale: string; canonical: string; fingerprint: string };
    });
    // The children really ran under different default locales, so a
    // localeCompare-based sort would have shown up here.
    expect(results.map((r) => r.locale)).toEqual(["en-US", "tr-TR", "de-DE"]);
    for (const r of results) {
      expect(Buffer.from(r.canonical, "utf8").equals(Buffer.from(RFC_CANONICAL, "utf8"))).toBe(true);
      expect(r.fingerprint).toBe(requestFingerprint("echo", RFC_KEYS_INPUT));
    }
    expect(RFC_CANONICAL.indexOf("\ud83d\ude00")).toBeLessThan(RFC_CANONICAL.indexOf("\ufb33"));
  });

  it("does not merge a body with an own '__proto__' member (JSON.parse keeps it as data) with {}", async () => {
    // A parsed HTTP body can carry "__proto__" as an ordinary member. If the
    // canonical copy drops it, this intent shares a fingerprint with {}.
    await run("k5", {});
    const error = await rejectionOf(run("k5", JSON.parse('{"__proto__":{"admin":true}}')));
    expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(calls.get("k5")).toBe(1);
  });
});

describe("canonicalization: no Unicode normalization, escaping never matters (BR-02)", () => {
  it("replays é written as an escape and as raw UTF-8, and answers 422 to e + combining accent", async () => {
    const escaped = JSON.parse('{"name":"caf\\u00e9"}') as { name: string };
    const raw = JSON.parse(Buffer.from('{"name":"café"}', "utf8").toString("utf8")) as { name: string };
    const first = await run("nf1", escaped, createCustomer as never);
    const again = await run("nf1", raw, createCustomer as never);
    expect(again).toEqual({ ...first, replayed: true });

    const before = await engine.inspect("t1", "nf1");
    const decomposed = JSON.parse('{"name":"cafe\\u0301"}') as { name: string };
    expect(decomposed.name.normalize("NFC")).toBe(escaped.name);
    const error = await rejectionOf(run("nf1", decomposed, createCustomer as never));
    expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(await engine.inspect("t1", "nf1")).toEqual(before);
    expect(await customers()).toEqual(["caf\u00e9"]);
    expect((await customers())[0]).toHaveLength(4);
  });

  it("replays U+2028 and BEL whatever their escaping, and stores them verbatim", async () => {
    const note = "a\u2028b\u0007c";
    const first = await run("esc2", JSON.parse('{"note":"a\\u2028b\\u0007c"}'));
    const again = await run("esc2", JSON.parse(`{"note":"\\u0061\u2028b\\u0007\\u0063"}`));
    expect(again.replayed).toBe(true);
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(again.body).toEqual({ n: 1, input: { note } });
    expect((await engine.inspect("t1", "esc2"))?.input).toEqual({ note });
  });

  it("refuses a lone surrogate with 400 invalid_input naming the path, before any row exists", async () => {
    const before = await customers();
    const error = await rejectionOf(run("sur3", JSON.parse('{"s":"\\ud800"}')));
    expect(error).toBeInstanceOf(InputValidationError);
    expect(error).toMatchObject({ code: "invalid_input", httpStatus: 400 });
    expect((error as InputValidationError).issues).toContainEqual({
      path: "$.s",
      message: expect.stringMatching(/surrogate/),
    });
    expect(await countRuns(t.db, { key: "sur3" })).toBe(0);
    expect(await customers()).toEqual(before);
    expect(calls.get("sur3")).toBeUndefined();
  });

  it("refuses a lone surrogate made by workflow code before commit: no effect, no broken record", async () => {
    // Cutting an emoji in half is the usual way a lone surrogate is born.
    const truncating = workflow("truncate_customer")
      .input(z.object({ name: z.string() }))
      .phase("insert_short", async ({ tx, tenantId, input }) => {
        await sql`INSERT INTO customers (tenant_id, name) VALUES (${tenantId}, 'short')`.execute(tx);
        return { short: input.name.slice(0, 1) };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const before = await customers();
    const error = await rejectionOf(
      engine.runOnce(truncating, { tenantId: "t1", key: "sur6", input: { name: "😀x" } }),
    );
    expect(error).toBeInstanceOf(UnstorableValueError);
    expect(error.message).toContain("insert_short");
    expect((error as UnstorableValueError).issues[0]?.path).toBe("$.short");
    expect(await customers()).toEqual(before);
    const rec = await engine.inspect("t1", "sur6");
    expect(rec).toMatchObject({ status: "parked", recoveryPoint: null });
  });
});
