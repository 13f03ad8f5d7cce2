/**
 * Hostile values at every door of `runOnce`: idempotency keys and tenant
 * ids, input payloads, phase results (state), outbox payloads and response
 * bodies. Random unicode, lone surrogates, NUL and other controls, huge
 * strings, deep nesting, BigInt, Map, Set, cycles, class instances, NaN.
 *
 * Every call must end in success or a typed `IdempoError` (never a raw
 * driver error), the error must be the one SPEC names for that door, a call
 * refused before the claim must leave no row at all, and one refused after
 * the claim must leave the record at its last recovery point with nothing
 * stored. Accepted values must come back exactly as a JSON round trip.
 *
 * Each property runs 100 cases by default (IDEMPO_FUZZ_RUNS raises it) and
 * stops early after 3 s, so the file stays well under 30 s.
 */
import fc from "fast-check";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  deriveStepKey,
  IdempoError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  UnstorableValueError,
  workflow,
} from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { describeError, fresh, RUNS, TIME_LIMIT_MS } from "./support/fuzz-runs.ts";
import { anyValue, isValidKey, keyString, roundTrip } from "./support/fuzz-values.ts";

const t = useTestDatabase();
let engine: Engine;
beforeAll(() => {
  engine = createEngine({ db: t.db, leaseMs: 60_000 });
});

// ---------------------------------------------------------------------------
// The workflow under test and the checks after every call

type Door = "input" | "state" | "outbox" | "response";
const current: { door: Door; value: unknown } = { door: "input", value: null };

const fuzz = workflow("fuzz")
  .phase("first", async ({ outbox }) => {
    if (current.door === "outbox") await outbox.enqueue("fuzz.topic", current.value);
    return current.door === "state" ? { v: current.value } : {};
  })
  .step("call", ({ idempotencyKey }) => ({ derived: idempotencyKey }))
  .respond(({ state }) => ({ status: 200, body: current.door === "response" ? current.value : state }));

async function counts(tenantId: unknown, key: unknown) {
  if (typeof tenantId !== "string" || typeof key !== "string" || !isValidKey(tenantId) || !isValidKey(key)) {
    return { runs: 0, history: 0, outbox: 0 };
  }
  const { rows } = await sql<{ runs: number; history: number; outbox: number }>`
    SELECT (SELECT count(*) FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key})::int AS runs,
           (SELECT count(*) FROM idempo.run_history WHERE tenant_id = ${tenantId} AND key = ${key})::int AS history,
           (SELECT count(*) FROM idempo.outbox WHERE tenant_id = ${tenantId} AND key = ${key})::int AS outbox
  `.execute(t.db);
  return rows[0] ?? { runs: -1, history: -1, outbox: -1 };
}

/** Call runOnce; fail unless it succeeded or raised an IdempoError. */
async function call(tenantId: unknown, key: unknown, input: unknown) {
  try {
    return { result: await engine.runOnce(fuzz, { tenantId, key, input } as never), error: undefined };
  } catch (error) {
    if (!(error instanceof IdempoError)) {
      throw new Error(`runOnce raised a raw error, not an IdempoError: ${describeError(error)}`, { cause: error });
    }
    return { result: undefined, error };
  }
}

// ---------------------------------------------------------------------------

describe("fuzzing keys and tenant ids", () => {
  it("a key is accepted exactly when SPEC's rule accepts it, kept verbatim, and a refused one leaves no row", async () => {
    await fc.assert(
      fc.asyncProperty(keyString, fc.boolean(), async (value, asTenant) => {
        const tenantId = asTenant ? value : fresh("tenant");
        const key = asTenant ? fresh("key") : value;
        const { result, error } = await call(tenantId, key, { n: 1 });
        if (isValidKey(value)) {
          expect(error, describeError(error)).toBeUndefined();
          expect(result).toMatchObject({ status: 200, replayed: false });
          const rec = await engine.inspect(tenantId as string, key as string);
          // Case-sensitive and never trimmed or normalised: the record is under exactly this string.
          expect([rec?.tenantId, rec?.key, rec?.status]).toEqual([tenantId, key, "completed"]);
          const derived = rec?.history?.find((h) => h.kind === "step")?.derivedKey;
          expect(derived).toBe(deriveStepKey(tenantId as string, key as string, "fuzz", "call"));
          expect(derived?.length).toBeLessThanOrEqual(255);
          expect((await call(tenantId, key, { n: 1 })).result).toMatchObject({ replayed: true });
        } else {
          expect(error, `accepted ${JSON.stringify(String(value))}`).toBeInstanceOf(InvalidIdempotencyKeyError);
          expect(error).toMatchObject({ code: "invalid_key", httpStatus: 400 });
          expect(await counts(tenantId, key)).toEqual({ runs: 0, history: 0, outbox: 0 });
          // The operator API applies the same rule.
          await expect(engine.inspect(tenantId as string, key as string)).rejects.toBeInstanceOf(
            InvalidIdempotencyKeyError,
          );
          await expect(engine.release(tenantId as string, key as string)).rejects.toBeInstanceOf(
            InvalidIdempotencyKeyError,
          );
        }
      }),
      { numRuns: RUNS * 2, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
  });

  it("two tenants with the same key are two records with distinct derived keys", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }), async (raw) => {
        const key = `k${raw}`;
        const [a, b] = [fresh("ta"), fresh("tb")];
        expect((await call(a, key, { n: 1 })).result?.status).toBe(200);
        expect((await call(b, key, { n: 2 })).result).toMatchObject({ status: 200, replayed: false });
        const keys = await Promise.all(
          [a, b].map(async (tenant) => (await engine.inspect(tenant, key))?.history?.[1]?.derivedKey),
        );
        expect(new Set(keys).size).toBe(2);
      }),
      { numRuns: 20, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
  });
});

describe("fuzzing values at each door", () => {
  const doors: readonly { door: Door; error: typeof InputValidationError | typeof UnstorableValueError }[] = [
    { door: "input", error: InputValidationError },
    { door: "state", error: UnstorableValueError },
    { door: "outbox", error: UnstorableValueError },
    { door: "response", error: UnstorableValueError },
  ];
  for (const { door, error: expected } of doors) {
    it(`${door}: stored and replayed as its JSON round trip, or refused with ${expected.name} and nothing stored`, async () => {
      await fc.assert(
        fc.asyncProperty(anyValue, async ({ value, valid, label }) => {
          const tenantId = fresh("tenant");
          const key = fresh("key");
          current.door = door;
          current.value = value;
          const input = door === "input" ? value : { n: 1 };
          const first = await call(tenantId, key, input);
          const after = await counts(tenantId, key);
          const rec = await engine.inspect(tenantId, key);
          if (valid) {
            expect(first.error, `${label}: ${describeError(first.error)}`).toBeUndefined();
            expect(rec?.status).toBe("completed");
            if (door === "input") expect(JSON.stringify(rec?.input)).toBe(roundTrip(value));
            if (door === "state")
              expect(JSON.stringify((rec?.state as { v?: unknown } | undefined)?.v)).toBe(roundTrip(value));
            if (door === "outbox") expect(after.outbox).toBe(1);
            if (door === "response") {
              // The first caller gets the body exactly as a replay will.
              expect(JSON.stringify(first.result?.body)).toBe(roundTrip(value === undefined ? null : value));
              const replay = await call(tenantId, key, input);
              expect(replay.result?.replayed).toBe(true);
              expect(JSON.stringify(replay.result?.body)).toBe(JSON.stringify(first.result?.body));
            }
            return;
          }
          expect(first.error, `${label} was accepted`).toBeInstanceOf(expected);
          expect((first.error as IdempoError).message.length).toBeGreaterThan(0);
          if (door === "input") {
            // Refused before the claim: no row anywhere.
            expect(after).toEqual({ runs: 0, history: 0, outbox: 0 });
            return;
          }
          // Refused after the claim: the run is parked at its last recovery point, nothing was stored for it.
          expect(after.runs).toBe(1);
          expect(after.outbox).toBe(0);
          expect(rec).toMatchObject({
            status: "parked",
            response: null,
            recoveryPoint: door === "response" ? "call" : null,
          });
          expect(rec?.state).toEqual(door === "response" ? { derived: expect.any(String) } : {});
        }),
        { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
      );
    });
  }
});

describe("fuzzing response statuses", () => {
  it("respond and ctx.fail accept an integer status 100-599 and refuse anything else with UnstorableValueError", async () => {
    const status = fc.oneof(
      fc.integer({ min: -1000, max: 1000 }),
      fc.double(),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, "200", null, undefined, 200n, 99, 100, 599, 600, 200.5),
    );
    await fc.assert(
      fc.asyncProperty(status, fc.boolean(), async (value, viaFail) => {
        const wf = workflow("fuzz_status")
          .step("decide", ({ fail }) => (viaFail ? fail(value as number, { declined: true }) : {}))
          .respond(() => ({ status: value as number, body: { ok: true } }));
        const [tenantId, key] = [fresh("tenant"), fresh("key")];
        let error: unknown;
        const result = await engine.runOnce(wf, { tenantId, key, input: {} }).catch((e: unknown) => {
          error = e;
          return undefined;
        });
        const valid = typeof value === "number" && Number.isInteger(value) && value >= 100 && value <= 599;
        if (valid) {
          expect(result).toMatchObject({ status: value, outcome: viaFail ? "failed" : "succeeded" });
          return;
        }
        expect(error, `status ${String(value)} was accepted`).toBeInstanceOf(UnstorableValueError);
        expect(await engine.inspect(tenantId, key)).toMatchObject({ status: "parked", response: null });
      }),
      { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
  });
});
