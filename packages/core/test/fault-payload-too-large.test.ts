/**
 * Fault of the kind "nothing bounds what is stored": a 100 MB signal was
 * accepted and carried through every later commit, and a 50 MB input and a
 * 50 MB outbox payload were accepted. Every value the engine stores (input,
 * signal payload, phase and step results, outbox payload, response body,
 * the `accepted` body, a canceled run's body) is bounded by
 * `maxPayloadBytes`, measured per value as canonical JSON UTF-8 bytes: a
 * value of exactly the bound is stored, one byte more raises
 * `PayloadTooLargeError` before anything is written. A result over it parks
 * the run, as a value that cannot be stored does.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, InvalidOptionError, PayloadTooLargeError, workflow } from "../src/index.ts";
import { rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const BOUND = 200;
const T = "size";

/** `{"v":"..."}`: exactly `bytes` bytes as canonical JSON, the string made of `unit` (1 or 2 UTF-8 bytes each). */
function sized(bytes: number, unit: "x" | "é" = "x"): { v: string } {
  const room = bytes - 8;
  if (unit === "x") return { v: "x".repeat(room) };
  return { v: "é".repeat(Math.floor(room / 2)) + "x".repeat(room % 2) };
}

async function count(table: string, key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.table(`idempo.${table}`)} WHERE tenant_id = ${T} AND key = ${key}`.execute(
    t.db,
  );
  return rows[0]?.n ?? 0;
}

function expectTooLarge(error: unknown, bytes: number, what: RegExp): void {
  expect(error).toBeInstanceOf(PayloadTooLargeError);
  const e = error as PayloadTooLargeError;
  expect([e.code, e.httpStatus, e.bytes, e.maxPayloadBytes]).toEqual(["payload_too_large", 413, bytes, BOUND]);
  expect(e.message).toMatch(what);
  expect(e.message).toContain(`${bytes} bytes`);
}

describe("maxPayloadBytes: the option", () => {
  it("defaults to 1 MiB (1 048 576 bytes): an input of exactly that is stored, one byte more is refused", async () => {
    const engine = createEngine({ db: t.db });
    const echo = workflow("size_default").respond(() => ({ status: 200, body: null }));
    const at = await engine.runOnce(echo, { tenantId: T, key: "d-at", input: sized(1_048_576) });
    expect(at.status).toBe(200);
    const over = await rejectionOf(engine.runOnce(echo, { tenantId: T, key: "d-over", input: sized(1_048_577) }));
    expect(over).toBeInstanceOf(PayloadTooLargeError);
    expect((over as PayloadTooLargeError).maxPayloadBytes).toBe(1_048_576);
    expect(await count("runs", "d-over")).toBe(0);
  });

  it("is an integer number of bytes: zero, negative, fractional and non-number bounds are refused", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, "1024" as never]) {
      expect(() => createEngine({ db: t.db, maxPayloadBytes: bad })).toThrow(InvalidOptionError);
    }
    expect(() => createEngine({ db: t.db, maxPayloadBytes: "1024" as never })).toThrow(
      /createEngine: maxPayloadBytes must be an integer, got the string "1024"/,
    );
  });
});

describe("every stored value is bounded, at the bound and one byte over", () => {
  let engine: Engine;
  beforeAll(() => {
    engine = createEngine({ db: t.db, maxPayloadBytes: BOUND });
  });

  it("runOnce input: nothing is claimed for an input over the bound; UTF-8 bytes count, not characters", async () => {
    const wf = workflow("size_input").respond(({ input }) => ({ status: 200, body: { got: typeof input } }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "in-at", input: sized(BOUND) })).status).toBe(200);
    expect((await engine.runOnce(wf, { tenantId: T, key: "in-at-2b", input: sized(BOUND, "é") })).status).toBe(200);
    const over = await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "in-over", input: sized(BOUND + 1) }));
    expectTooLarge(over, BOUND + 1, /input/);
    // 97 two-byte characters: 105 UTF-16 code units, but 202 bytes.
    const wide = await rejectionOf(
      engine.runOnce(wf, { tenantId: T, key: "in-over-2b", input: sized(BOUND + 2, "é") }),
    );
    expectTooLarge(wide, BOUND + 2, /input/);
    expect(await count("runs", "in-over")).toBe(0);
    expect(await count("runs", "in-over-2b")).toBe(0);
  });

  it("enqueue input: refused before any SQL", async () => {
    const wf = workflow("size_enqueue").respond(() => ({ status: 200, body: null }));
    expect(await engine.enqueue(t.db, wf, { tenantId: T, key: "enq-at", input: sized(BOUND) })).toEqual({
      created: true,
    });
    const over = await rejectionOf(engine.enqueue(t.db, wf, { tenantId: T, key: "enq-over", input: sized(BOUND + 1) }));
    expectTooLarge(over, BOUND + 1, /input/);
    expect(await count("runs", "enq-over")).toBe(0);
  });

  it("signal payload: refused before it is stored; the run keeps waiting and takes one at the bound", async () => {
    const wf = workflow("size_signal")
      .waitFor("confirmed")
      .respond(({ state }) => ({ status: 200, body: { n: state.confirmed === null ? 0 : 1 } }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "sig", input: {} })).status).toBe(202);
    const over = await rejectionOf(engine.signal(T, "sig", "confirmed", sized(BOUND + 1)));
    expectTooLarge(over, BOUND + 1, /signal 'confirmed'/);
    expect(await count("signals", "sig")).toBe(0);
    expect((await engine.inspect(T, "sig"))?.status).toBe("suspended");
    expect(await engine.signal(T, "sig", "confirmed", sized(BOUND))).toEqual({ duplicate: false, woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "sig", input: {} })).toMatchObject({ status: 200 });
  });

  it("step result: one over the bound parks the run at its last recovery point; nothing of it is committed", async () => {
    let bytes = BOUND;
    const wf = workflow("size_step")
      .phase("start", () => ({ started: true }))
      .step("fetch", () => sized(bytes))
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "step-at", input: {} })).status).toBe(200);
    bytes = BOUND + 1;
    const over = await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "step-over", input: {} }));
    expectTooLarge(over, BOUND + 1, /step 'fetch'/);
    const rec = await engine.inspect(T, "step-over");
    expect(rec?.status).toBe("parked");
    expect(rec?.recoveryPoint).toBe("start");
    expect(rec?.parkedReason).toMatch(/step 'fetch'/);
  });

  it("phase result: one over the bound parks the run and rolls the phase's writes back", async () => {
    let bytes = BOUND;
    const wf = workflow("size_phase")
      .phase("write", async ({ tx, key }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${T}, 'c', 1)`.execute(tx);
        return sized(bytes);
      })
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "phase-at", input: {} })).status).toBe(200);
    bytes = BOUND + 1;
    const over = await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "phase-over", input: {} }));
    expectTooLarge(over, BOUND + 1, /phase 'write'/);
    expect((await engine.inspect(T, "phase-over"))?.status).toBe("parked");
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM orders WHERE id = 'phase-over'`.execute(t.db);
    expect(rows[0]?.n).toBe(0);
  });

  it("the bound is per value: results that fit one by one are stored although the state grows past it", async () => {
    const wf = workflow("size_per_value")
      .step("a", () => ({ a: "x".repeat(BOUND - 10) }))
      .step("b", () => ({ b: "x".repeat(BOUND - 10) }))
      .respond(({ state }) => ({ status: 200, body: { total: state.a.length + state.b.length } }));
    expect(await engine.runOnce(wf, { tenantId: T, key: "per-value", input: {} })).toMatchObject({
      status: 200,
      body: { total: 2 * (BOUND - 10) },
    });
  });

  it("outbox payload: one over the bound is refused in the phase, which rolls back; the run is parked", async () => {
    let bytes = BOUND;
    const wf = workflow("size_outbox")
      .phase("notify", async ({ outbox }) => {
        await outbox.enqueue("receipt.email", sized(bytes));
      })
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "out-at", input: {} })).status).toBe(200);
    expect(await count("outbox", "out-at")).toBe(1);
    bytes = BOUND + 1;
    const over = await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "out-over", input: {} }));
    expectTooLarge(over, BOUND + 1, /outbox message 'receipt.email'/);
    expect(await count("outbox", "out-over")).toBe(0);
    expect((await engine.inspect(T, "out-over"))?.status).toBe("parked");
  });

  it("response body (respond and ctx.fail): one over the bound parks the run instead of completing it", async () => {
    let bytes = BOUND;
    const wf = workflow("size_respond")
      .phase("p", () => ({}))
      .respond(() => ({ status: 200, body: sized(bytes) }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "resp-at", input: {} })).status).toBe(200);
    bytes = BOUND + 1;
    expectTooLarge(
      await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "resp-over", input: {} })),
      BOUND + 1,
      /respond/,
    );
    expect((await engine.inspect(T, "resp-over"))?.status).toBe("parked");

    const failing = workflow("size_fail")
      .step("charge", ({ fail }) => fail(402, sized(bytes)))
      .respond(() => ({ status: 200, body: null }));
    bytes = BOUND;
    expect((await engine.runOnce(failing, { tenantId: T, key: "fail-at", input: {} })).status).toBe(402);
    bytes = BOUND + 1;
    expectTooLarge(
      await rejectionOf(engine.runOnce(failing, { tenantId: T, key: "fail-over", input: {} })),
      BOUND + 1,
      /ctx.fail/,
    );
    expect((await engine.inspect(T, "fail-over"))?.status).toBe("parked");
  });

  it("accepted body: one over the bound is refused with the suspension", async () => {
    let bytes = BOUND;
    const wf = workflow("size_accepted")
      .waitFor("confirmed")
      .accepted(() => sized(bytes))
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "acc-at", input: {} })).status).toBe(202);
    bytes = BOUND + 1;
    const over = await rejectionOf(engine.runOnce(wf, { tenantId: T, key: "acc-over", input: {} }));
    expectTooLarge(over, BOUND + 1, /accepted/);
    expect((await engine.inspect(T, "acc-over"))?.status).toBe("parked");
  });

  it("cancel body: one over the bound is refused and the run is left as it was", async () => {
    const wf = workflow("size_cancel")
      .waitFor("confirmed")
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "cancel", input: {} })).status).toBe(202);
    expectTooLarge(await rejectionOf(engine.cancel(T, "cancel", { body: sized(BOUND + 1) })), BOUND + 1, /cancel/);
    expect((await engine.inspect(T, "cancel"))?.status).toBe("suspended");
    expect((await engine.cancel(T, "cancel", { body: sized(BOUND) })).response?.outcome).toBe("canceled");
  });
});
