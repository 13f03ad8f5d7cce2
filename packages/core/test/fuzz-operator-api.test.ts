/**
 * Hostile arguments to the operator API: listKeys' filters and cursor,
 * listOutbox's filters, retryOutbox, forget and inspect must answer or
 * raise a typed IdempoError, never a raw driver error.
 *
 * The property runs 200 cases by default (IDEMPO_FUZZ_RUNS raises it: twice
 * its value) and stops early after 3 s.
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, IdempoError } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { describeError, RUNS, TIME_LIMIT_MS } from "./support/fuzz-runs.ts";
import { codeUnit, keyChar, keyString } from "./support/fuzz-values.ts";

const t = useTestDatabase();
let engine: Engine;
beforeAll(() => {
  engine = createEngine({ db: t.db, leaseMs: 60_000 });
});

describe("fuzzing the operator API", () => {
  // Known failure: listKeys' workflow filter and cursor, listOutbox's topic and
  // retryOutbox's message id reach SQL unchecked, so NUL (22021) or a cursor
  // with a bad timestamp (22007) surface as raw driver errors.
  it("listKeys, listOutbox, retryOutbox, forget and inspect answer or raise an IdempoError, never a driver error", async () => {
    const text = fc.oneof(keyString, fc.string({ unit: codeUnit, maxLength: 8 }));
    const cursorParts = fc.tuple(
      fc.oneof(fc.constantFrom("2026-01-01T00:00:00Z", "garbage", "", "2026-13-45"), fc.string({ unit: keyChar })),
      fc.string({ unit: keyChar, maxLength: 6 }),
      fc.string({ unit: keyChar, maxLength: 6 }),
    );
    const cursor = fc.oneof(
      cursorParts.map((parts) => Buffer.from(JSON.stringify(parts)).toString("base64url")),
      fc.string({ unit: keyChar, maxLength: 20 }),
    );
    const op = fc.oneof(
      fc.record({ kind: fc.constant("listKeys" as const), tenantId: fc.option(text), workflow: fc.option(text) }),
      fc.record({ kind: fc.constant("listKeysCursor" as const), cursor }),
      fc.record({ kind: fc.constant("listOutbox" as const), topic: fc.option(text), tenantId: fc.option(text) }),
      fc.record({ kind: fc.constant("retryOutbox" as const), tenantId: text, messageId: text }),
      fc.record({ kind: fc.constant("forget" as const), tenantId: text, key: text }),
      fc.record({ kind: fc.constant("inspect" as const), tenantId: text, key: text }),
    );
    const opt = <K extends string>(k: K, v: unknown) => (v === null ? {} : ({ [k]: v } as Record<K, never>));
    await fc.assert(
      fc.asyncProperty(op, async (o) => {
        try {
          switch (o.kind) {
            case "listKeys":
              await engine.listKeys({ ...opt("tenantId", o.tenantId), ...opt("workflow", o.workflow) });
              break;
            case "listKeysCursor":
              await engine.listKeys({ cursor: o.cursor });
              break;
            case "listOutbox":
              await engine.listOutbox({ ...opt("tenantId", o.tenantId), ...opt("topic", o.topic) });
              break;
            case "retryOutbox":
              await engine.retryOutbox(o.tenantId as string, o.messageId as string);
              break;
            case "forget":
              await engine.forget(o.tenantId as string, o.key as string);
              break;
            case "inspect":
              await engine.inspect(o.tenantId as string, o.key as string);
              break;
          }
        } catch (error) {
          expect(
            error,
            `${JSON.stringify(o, (_k, v) => (typeof v === "object" || typeof v === "string" ? v : String(v)))}: ${describeError(error)}`,
          ).toBeInstanceOf(IdempoError);
        }
      }),
      { numRuns: RUNS * 2, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
  });
});
