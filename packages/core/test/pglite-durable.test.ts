/**
 * Durable waits and background runs on embedded PGlite: a worker woken by
 * LISTEN over the one connection, signals (also inside the application's
 * transaction), timeouts and sleeps.
 */
import type { PGlite } from "@electric-sql/pglite";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import type { TestDb } from "./support/db.ts";
import { openPGlite } from "./support/pglite.ts";

const T = "acme";
let pglite: PGlite;
let db: TestDb;

beforeAll(async () => {
  ({ pglite, db } = await openPGlite());
}, 300_000);
afterAll(async () => {
  await db?.destroy();
});

describe("PGlite: durable waits and background runs", () => {
  it("enqueue in a transaction, a worker woken by LISTEN, a signal retried twice, a timeout, engine.wait", async () => {
    const engine = createEngine({ db, listen: pglite });
    const effects = { charge: 0, capture: 0, voided: 0 };
    const threeDs = workflow("pglite_3ds")
      .input(z.object({ order: z.string() }))
      .step("charge", ({ input }) => {
        effects.charge++;
        return { chargeId: `ch_${input.order}` };
      })
      .waitFor("confirmed", {
        timeoutMs: 3_600_000,
        schema: z.object({ ok: z.boolean() }),
        onTimeout: (ctx) => {
          effects.voided++;
          return ctx.fail(402, { voided: true });
        },
      })
      .phase("capture", ({ state }) => {
        effects.capture++;
        return { captured: state.chargeId };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const worker = engine.startWorker({ workflows: [threeDs], intervalMs: 600_000, listen: pglite, sweep: false });
    try {
      await db.transaction().execute(async (tx) => {
        await engine.enqueue(tx, threeDs, { tenantId: T, key: "3ds-a", input: { order: "a" } });
        await engine.enqueue(tx, threeDs, { tenantId: T, key: "3ds-b", input: { order: "b" } });
      });
      await expect
        .poll(async () => (await engine.inspect(T, "3ds-a"))?.waitingFor?.name, { timeout: 120_000 })
        .toBe("confirmed");
      await expect
        .poll(async () => (await engine.inspect(T, "3ds-b"))?.waitingFor?.name, { timeout: 120_000 })
        .toBe("confirmed");
      // The provider's webhook, delivered three times.
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(false);
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(true);
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(true);
      expect(await engine.wait(T, "3ds-a", { timeoutMs: 120_000 })).toMatchObject({
        status: 201,
        body: { captured: "ch_a", confirmed: { ok: true } },
      });
      // The second order is never confirmed: its timeout passes.
      await sql`UPDATE idempo.runs SET wake_at = now() WHERE tenant_id = ${T} AND key = '3ds-b'`.execute(db);
      // Moving the time by hand notifies no one (the worker would look again at the old wake-up time, an hour away).
      await sql`SELECT pg_notify('idempo_due', 'pglite_3ds')`.execute(db);
      expect(await engine.wait(T, "3ds-b", { timeoutMs: 120_000 })).toMatchObject({
        status: 402,
        body: { voided: true },
      });
      expect(effects).toEqual({ charge: 2, capture: 1, voided: 1 });
    } finally {
      await worker.stop();
    }
  });

  it("signal with { tx } inside the application's transaction (one connection: without tx it would wait for it)", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_signal_tx")
      .waitFor("confirmed", { schema: z.object({ ok: z.boolean() }) })
      .respond(({ state }) => ({ status: 201, body: state }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "stx", input: {} })).status).toBe(202);
    await expect(
      db.transaction().execute(async (tx) => {
        await engine.signal(T, "stx", "confirmed", { ok: false }, { tx });
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    expect((await engine.inspect(T, "stx"))?.status).toBe("suspended");
    await db.transaction().execute(async (tx) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o-stx', ${T}, 'c', 1)`.execute(tx);
      expect(await engine.signal(T, "stx", "confirmed", { ok: true }, { tx })).toEqual({
        duplicate: false,
        woke: true,
      });
    });
    expect(await engine.runOnce(wf, { tenantId: T, key: "stx", input: {} })).toMatchObject({
      status: 201,
      body: { confirmed: { ok: true } },
    });
  });

  it("sleep: 202, then resumed by runOnce once due", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_sleep")
      .sleep("nap", 60_000)
      .respond(() => ({ status: 200, body: { woke: true } }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "nap", input: {} })).status).toBe(202);
    await sql`UPDATE idempo.runs SET wake_at = now() - interval '1 second' WHERE tenant_id = ${T} AND key = 'nap'`.execute(
      db,
    );
    expect(await engine.runOnce(wf, { tenantId: T, key: "nap", input: {} })).toMatchObject({
      status: 200,
      body: { woke: true },
    });
  });
});
