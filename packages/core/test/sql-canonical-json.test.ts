/**
 * The SQL interface computes fingerprints in SQL (migration 0017), so a
 * request sent through SQL and retried through TypeScript is the same
 * request only if `idempo.canonical_json` writes, for every JSON value,
 * exactly the RFC 8785 text json/fingerprint.ts writes for the value
 * JavaScript parses from it: member order by UTF-16 code units (not by
 * code point, not jsonb's length-first order), JSON.stringify's string
 * escapes, ECMAScript's number spelling of the nearest double. Random
 * values, random number spellings near every edge of the double range,
 * and the key rules of keys/key-validation.ts against `idempo.check_key`.
 */

import fc from "fast-check";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { canonicalJson, fingerprintOf, requestFingerprint } from "../src/json/fingerprint.ts";
import type { JsonValue } from "../src/json/json-value.ts";
import { assertValidKey } from "../src/keys/key-validation.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 2 });

beforeAll(async () => {
  // One verdict per string, so a batch needs one round trip.
  await sql`
    CREATE FUNCTION key_verdict(p_value text) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM idempo.check_key(p_value, 'tenant id');
      RETURN 'ok';
    EXCEPTION WHEN SQLSTATE 'IP001' THEN
      RETURN SQLERRM;
    END $$`.execute(t.db);
});

/** canonical_json of each JSON text, in order (null where SQL refuses the value). */
async function sqlCanonical(texts: readonly string[]): Promise<(string | null)[]> {
  const { rows } = await sql<{ c: string | null }>`
    SELECT idempo.canonical_json(u.x::jsonb) AS c FROM unnest(${texts}::text[]) WITH ORDINALITY AS u (x, n) ORDER BY u.n`.execute(
    t.db,
  );
  return rows.map((r) => r.c);
}

/** What the engine would fingerprint for the value JavaScript reads from `text`; null where it is not a finite value. */
function tsCanonical(text: string): string | null {
  const value = JSON.parse(text) as JsonValue;
  const finite = (v: unknown): boolean =>
    typeof v === "number"
      ? Number.isFinite(v)
      : v !== null && typeof v === "object"
        ? Object.values(v).every(finite)
        : true;
  return finite(value) ? canonicalJson(value) : null;
}

/** Strings of every plane (no NUL: PostgreSQL's text cannot hold it), keys included. */
const text = fc.string({ unit: "binary", maxLength: 12 }).filter((s) => !s.includes("\u0000"));
const tricky = fc.constantFrom(
  "",
  "a",
  "b",
  "aa",
  "\u007f",
  "é",
  "\u2028",
  "\ue000",
  "\uffff",
  "😀",
  "𝒳",
  "\u0001",
  '"',
  "\\",
);
const key = fc.oneof(
  text,
  tricky,
  fc.tuple(tricky, tricky).map(([a, b]) => a + b),
);
const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    text,
    tricky,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(key, tie("value"), { maxKeys: 5 }),
  ),
})).value;

describe("idempo.canonical_json is json/fingerprint.ts's canonical text", () => {
  it("for random values (key order by UTF-16 code units, string escapes, numbers)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(json, { minLength: 50, maxLength: 50 }), async (values) => {
        const texts = values.map((v) => JSON.stringify(v));
        expect(await sqlCanonical(texts)).toEqual(values.map((v) => canonicalJson(v)));
      }),
      { numRuns: 8 },
    );
  });

  it("for a number halfway between two doubles, which reads as the even one (a bound JavaScript spells)", async () => {
    // Each lies on a bound of its double's rounding interval; ECMAScript writes the bound when it is shorter.
    const ties = [
      "18490768613004190",
      "-18490768613004192",
      "18776992721757392.00000000000000000000",
      "25470601183166718000",
    ];
    const texts = ties.map((n) => `[${n}]`);
    expect(await sqlCanonical(texts)).toEqual(texts.map(tsCanonical));
    expect(await sqlCanonical(texts)).toEqual([
      "[18490768613004190]",
      "[-18490768613004190]",
      "[18776992721757390]",
      "[25470601183166720000]",
    ]);
  });

  it("for numbers however they are spelled, near every edge of the double range", async () => {
    const digits = (max: number) => fc.stringMatching(new RegExp(`^[0-9]{1,${max}}$`));
    const spelled = fc
      .tuple(
        fc.boolean(),
        digits(25),
        fc.option(digits(25), { nil: undefined }),
        fc.option(fc.integer({ min: -345, max: 330 }), { nil: undefined }),
      )
      .map(([neg, int, frac, exp]) => {
        const whole = int.replace(/^0+(?=\d)/, "");
        return `${neg ? "-" : ""}${whole}${frac === undefined ? "" : `.${frac}`}${exp === undefined ? "" : `e${exp}`}`;
      });
    const doubles = fc
      .double({ noNaN: true, noDefaultInfinity: true })
      .chain((d) =>
        fc.constantFrom(
          JSON.stringify(d),
          d.toExponential(),
          d.toPrecision(17),
          d.toExponential(20),
          Math.abs(d) < 1e21 ? d.toFixed(20) : JSON.stringify(d),
        ),
      );
    const edges = fc.constantFrom(
      "5e-324",
      "2.4703282292062328e-324",
      "2.4703282292062327e-324",
      "1.7976931348623157e308",
      "1.7976931348623158e308",
      "1.7976931348623159e308",
      "9007199254740993",
      "123456789012345678901",
      "1e21",
      "999999999999999999999",
      "0.000001",
      "0.0000001",
      "1e-7",
      "100.000",
      "-0.0",
      // Halfway between two doubles, read as the even one, which JavaScript spells with these 16 digits.
      "18490768613004190",
      "-18490768613004192",
      "18776992721757392.00000000000000000000",
      "25470601183166718000",
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(spelled, doubles, edges), { minLength: 100, maxLength: 100 }),
        async (nums) => {
          const texts = nums.map((n) => `[${n}]`);
          const expected = texts.map((tx) => {
            // A nonzero spelling that JavaScript reads as 0 (below half the smallest double) is refused in SQL.
            const read = JSON.parse(tx) as number[];
            if (read[0] === 0 && /[1-9]/.test(tx.replace(/e.*$/i, ""))) return null;
            return tsCanonical(tx);
          });
          expect(await sqlCanonical(texts)).toEqual(expected);
        },
      ),
      { numRuns: 6 },
    );
  });

  it("gives the engine's request and signal fingerprints", async () => {
    const value = { "😀": [1.5, "x\n"], "\uffff": null, b: { amount: 1250, note: "é" } };
    const { rows } = await sql<{ request: string; signal: string }>`
      SELECT idempo.request_fingerprint('checkout', idempo.canonical_json(${JSON.stringify(value)}::jsonb)) AS request,
             idempo.request_fingerprint('signal:paid', idempo.canonical_json(${JSON.stringify(value)}::jsonb)) AS signal`.execute(
      t.db,
    );
    expect(rows[0]).toEqual({
      request: requestFingerprint("checkout", value),
      signal: fingerprintOf("signal:paid", canonicalJson(value)),
    });
  });
});

describe("idempo.check_key is keys/key-validation.ts", () => {
  it("accepts and refuses the same strings, with the same words", async () => {
    const pieces = fc.constantFrom(
      "a",
      " ",
      "\t",
      "\u0085",
      "\u00a0",
      "\u1680",
      "\u2000",
      "\u200a",
      "\u200b",
      "\u2028",
      "\u202f",
      "\u205f",
      "\u3000",
      "\ufeff",
      "\u180e",
      "\u007f",
      "\u009f",
      "\u00a1",
      "é",
      "😀",
    );
    const candidate = fc.oneof(
      fc.array(pieces, { maxLength: 6 }).map((p) => p.join("")),
      text,
      fc.integer({ min: 250, max: 260 }).map((n) => "x".repeat(n)),
      fc.integer({ min: 126, max: 129 }).map((n) => "é".repeat(n)),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(candidate, { minLength: 60, maxLength: 60 }), async (values) => {
        const { rows } = await sql<{ v: string }>`
          SELECT key_verdict(u.x) AS v FROM unnest(${values}::text[]) WITH ORDINALITY AS u (x, n) ORDER BY u.n`.execute(
          t.db,
        );
        const expected = values.map((v) => {
          try {
            assertValidKey(v, "tenant id");
            return "ok";
          } catch (error) {
            return `invalid_key: ${(error as Error).message}`;
          }
        });
        expect(rows.map((r) => r.v)).toEqual(expected);
      }),
      { numRuns: 6 },
    );
  });
});
