/**
 * Fuzzing through HTTP: random Idempotency-Key header values, tenants and
 * bodies (arbitrary JSON, malformed JSON text, lone surrogate escapes)
 * against a real server. Every request must end in an answer below 500 (the
 * workflow's own 201/402/409, or a typed 4xx problem), never a 5xx, and a
 * refused request must leave no record behind.
 */
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { honoHarness } from "./support/apps/hono-app.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";
import { Effects } from "./support/effects.ts";
import type { RunningApp } from "./support/routes.ts";

const t = useTestDatabase();
const effects = new Effects();
let app: RunningApp;

beforeAll(async () => {
  app = await honoHarness.start({ engine: t.engine, db: t.db, effects });
});
afterAll(async () => {
  await app?.close();
});

// What an HTTP/1.1 client can put in a header value (no CR, LF or NUL).
const headerSafe = (s: string) => /^[\t\x20-\x7e\x80-\xff]*$/.test(s);

const keyHeader = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ minLength: 250, maxLength: 300 }),
  fc.constantFrom("", " ", "\t", '""', '"a"', '"a', "a, b", "abc", '"\\x"', "ÿÿ"),
  fc.uuid(),
);

const body = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => ({ json: v as unknown })), weight: 3 },
  {
    arbitrary: fc
      .record({ cartId: fc.string({ maxLength: 20 }), amountCents: fc.integer({ min: -5, max: 10_000 }) })
      .map((v) => ({ json: v as unknown })),
    weight: 3,
  },
  {
    arbitrary: fc
      .constantFrom('{"cartId":"\\ud800","amountCents":5}', '{"cartId":', "[1,2", "nul\u0000l", "{}{}")
      .map((s) => ({ text: s })),
    weight: 1,
  },
  { arbitrary: fc.string({ maxLength: 60 }).map((s) => ({ text: s })), weight: 1 },
);

describe("fuzzing the Idempotency-Key middleware", () => {
  it("never answers 5xx and never stores a refused request", async () => {
    const seen: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        keyHeader.filter(headerSafe),
        body,
        fc.constantFrom("t1-a", "t2-a", ""),
        async (key, payload, token) => {
          const unique = `${key}${randomUUID().slice(0, 6)}`.slice(0, 300);
          const headers: [string, string][] = [["Idempotency-Key", headerSafe(unique) ? unique : key]];
          if (token) headers.push(["Authorization", `Bearer ${token}`]);
          const res =
            "json" in payload
              ? await send(app.url, { path: "/orders", headers, json: payload.json })
              : await send(app.url, {
                  path: "/orders",
                  headers: [...headers, ["Content-Type", "application/json"]],
                  body: payload.text,
                });
          seen.push(res.status);
          expect(res.status, res.body.toString("utf8").slice(0, 300)).toBeLessThan(500);
          if (res.status === 400 || res.status === 422 || res.status === 413) {
            expect(String(res.headers["content-type"])).toContain("application/problem+json");
          }
          if (res.status === 400) {
            const sentKey = headers[0]?.[1] ?? "";
            const { rows } = await sql<{ n: number }>`
              SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${sentKey}`.execute(t.db);
            expect(rows[0]?.n).toBe(0);
          }
        },
      ),
      { numRuns: 150, interruptAfterTimeLimit: 20_000 },
    );
    // The fuzz reached both refusals and successes.
    expect(seen.some((s) => s === 400)).toBe(true);
    expect(seen.some((s) => s === 201)).toBe(true);
  });
});
