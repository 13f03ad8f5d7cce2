import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

// Faults found by reviewing the engine as a new user would.
const t = useTestDatabase();

describe("control flow cannot be swallowed", () => {
  it("a ctx.fail caught by workflow code still stores the failure, not a success", async () => {
    let charged = 0;
    const wf = workflow("swallowed_fail")
      .step("charge", ({ fail }) => {
        try {
          fail(402, { declined: true });
        } catch {
          // a careless catch-all
        }
        charged++;
        return { charged: true };
      })
      .respond(() => ({ status: 201, body: { charged: true } }));
    const engine = createEngine({ db: t.db });
    const res = await engine.runOnce(wf, { tenantId: "cf", key: "k1", input: {} });
    expect(res).toMatchObject({ status: 402, outcome: "failed", body: { declined: true } });
    expect((await engine.runOnce(wf, { tenantId: "cf", key: "k1", input: {} })).status).toBe(402);
    expect(charged).toBe(1);
  });
});

describe("a finished step is never called again because respond failed", () => {
  it("records the step's result before respond's error surfaces", async () => {
    let calls = 0;
    let broken = true;
    const wf = workflow("respond_after_step")
      .step("charge", () => {
        calls++;
        return { chargeId: `ch_${calls}` };
      })
      .respond(({ state }): { status: number; body: unknown } =>
        broken ? { status: 201, body: { bad: new Map() } } : { status: 201, body: state },
      );
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await expect(engine.runOnce(wf, { tenantId: "rs", key: "k1", input: {} })).rejects.toMatchObject({
      code: "unstorable_value",
    });
    expect((await engine.inspect("rs", "k1"))?.recoveryPoint).toBe("charge");
    broken = false;
    // A body that cannot be stored parks the run; after the fix, unpark makes it takeable again.
    expect(await engine.inspect("rs", "k1")).toMatchObject({ status: "parked" });
    await engine.unpark("rs", "k1");
    const res = await engine.runOnce(wf, { tenantId: "rs", key: "k1", input: {} });
    expect(res.body).toEqual({ chargeId: "ch_1" });
    expect(calls).toBe(1);
  });
});

describe("the relay survives hostile handlers", () => {
  it("an error text with NUL is stored and the message still dead-letters", async () => {
    const wf = workflow("nul_error")
      .phase("p", async ({ outbox }) => {
        await outbox.enqueue("nul", {});
        return {};
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "rn", key: "k1", input: {} });
    let calls = 0;
    const relay = engine.startRelay({
      handlers: {
        nul: () => {
          calls++;
          throw new Error("upstream said \u0000 bad");
        },
      },
      maxAttempts: 2,
      backoffMs: 1,
      pollIntervalMs: 20,
    });
    onTestFinished(() => relay.stop());
    await waitFor(
      async () => ((await engine.listOutbox({ tenantId: "rn" }))[0]?.status === "dead" ? true : undefined),
      30_000,
    );
    const [message] = await engine.listOutbox({ tenantId: "rn" });
    expect(message).toMatchObject({ status: "dead", attempts: 2, lastError: "upstream said \\u0000 bad" });
    expect(calls).toBe(2);
  });

  it("a handler that hangs and ignores its signal does not stop other deliveries", async () => {
    const wf = workflow("hang_and_go")
      .phase("p", async ({ outbox }) => {
        await outbox.enqueue("hang", {});
        for (let i = 0; i < 6; i++) await outbox.enqueue("ok", { i });
        return {};
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "rh", key: "k1", input: {} });
    const delivered: number[] = [];
    const relay = engine.startRelay({
      handlers: {
        hang: () => new Promise<void>(() => {}),
        ok: (m) => {
          delivered.push((m.payload as { i: number }).i);
        },
      },
      concurrency: 2,
      leaseMs: 5_000,
      pollIntervalMs: 20,
    });
    onTestFinished(() => relay.stop());
    // The handler runs before its delivery is recorded: wait for the records, not for the calls.
    const deliveredRows = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.outbox WHERE tenant_id = 'rh' AND status = 'delivered'`.execute(t.db);
      return rows[0]?.n ?? 0;
    };
    await waitFor(async () => ((await deliveredRows()) >= 6 ? true : undefined), 30_000);
    expect(delivered.sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(await deliveredRows()).toBe(6);
  });
});

describe("set-up mistakes get a clear error", () => {
  it("runOnce before migrate names the missing migration", async () => {
    const engine = createEngine({ db: t.db, schema: "never_migrated" });
    const wf = workflow("unmigrated").respond(() => ({ status: 200, body: {} }));
    await expect(engine.runOnce(wf, { tenantId: "um", key: "k1", input: {} })).rejects.toMatchObject({
      code: "workflow_usage",
      message: expect.stringContaining("engine.migrate()"),
    });
  });

  it("runOnce on a schema migrated before the statement functions names the missing migration", async () => {
    const engine = createEngine({ db: t.db, schema: "migrated_before_0008" });
    await engine.migrate();
    // What a schema last migrated by a release without the statement functions lacks: every
    // form of the claim function (0009's and 0010's).
    for (const row of (
      await sql<{
        sig: string;
      }>`SELECT p.oid::regprocedure::text AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'migrated_before_0008' AND p.proname = 'claim_new_key'`.execute(t.db)
    ).rows) {
      await sql.raw(`DROP FUNCTION ${row.sig}`).execute(t.db);
    }
    const wf = workflow("before_functions").respond(() => ({ status: 200, body: {} }));
    await expect(engine.runOnce(wf, { tenantId: "um", key: "k1", input: {} })).rejects.toMatchObject({
      code: "workflow_usage",
      message: expect.stringContaining("engine.migrate()"),
    });
    // Nothing was claimed by the refused call.
    expect(await engine.inspect("um", "k1")).toBeNull();
  });
});

describe("input schemas that are not deterministic", () => {
  it("a takeover refuses to resume rather than send a different default downstream", async () => {
    const sent: string[] = [];
    let crash = true;
    const wf = workflow("random_default")
      .input(z.object({ amount: z.number(), requestId: z.string().default(() => randomUUID()) }))
      .step("charge", ({ input }) => {
        sent.push(input.requestId);
        if (crash) {
          crash = false;
          throw new Error("timeout after the provider charged");
        }
        return { charged: true };
      })
      .respond(({ input }) => ({ status: 201, body: { requestId: input.requestId } }));
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await expect(engine.runOnce(wf, { tenantId: "nd", key: "k1", input: { amount: 5 } })).rejects.toThrow("timeout");
    await engine.release("nd", "k1");
    await expect(engine.runOnce(wf, { tenantId: "nd", key: "k1", input: { amount: 5 } })).rejects.toMatchObject({
      code: "workflow_definition",
    });
    expect(sent).toHaveLength(1);
  });

  it("deterministic defaults and coercions resume normally", async () => {
    let crash = true;
    const wf = workflow("stable_default")
      .input(z.object({ at: z.coerce.date(), currency: z.string().default("eur") }))
      .step("charge", ({ input }) => {
        if (crash) {
          crash = false;
          throw new Error("timeout");
        }
        return { at: input.at.toISOString(), currency: input.currency };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    const input = { at: "2024-01-01T00:00:00.000Z" };
    await expect(engine.runOnce(wf, { tenantId: "nd", key: "k2", input })).rejects.toThrow("timeout");
    await engine.release("nd", "k2");
    const res = await engine.runOnce(wf, { tenantId: "nd", key: "k2", input });
    expect(res.body).toEqual({ at: "2024-01-01T00:00:00.000Z", currency: "eur" });
  });
});

describe("error policy covers respond", () => {
  it("onUnknownError 'store' stores a respond error even with no phases or steps", async () => {
    const wf = workflow("respond_only", { onUnknownError: "store" }).respond(() => {
      throw new Error("respond bug");
    });
    const engine = createEngine({ db: t.db });
    const res = await engine.runOnce(wf, { tenantId: "rp", key: "k1", input: {} });
    expect(res).toMatchObject({ status: 500, outcome: "errored" });
    expect((await engine.inspect("rp", "k1"))?.status).toBe("completed");
  });
});
