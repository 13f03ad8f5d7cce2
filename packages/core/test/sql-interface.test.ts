/**
 * The SQL interface for other languages (migration 0017): a run enqueued
 * through SQL, in the caller's own transaction, is executed once by a
 * TypeScript worker; signals sent through SQL count once however often
 * they are repeated, and a TypeScript caller sees the same request and the
 * same signal (the fingerprints are equal). What SQL cannot check is
 * checked by the run: a stored signal that fails the wait's schema is
 * discarded, recorded in the history, and a later one taken; an input that
 * fails the workflow's schema parks the run.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, Worker } from "../src/index.ts";
import { createEngine, IdempotencyKeyMismatchError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { registeredVersions, sqlEnqueue, sqlError, sqlInspect, sqlSignal } from "./support/sql-api.ts";

const t = useTestDatabase({ pool: 8 });
const T = "acme";

function worker(engine: Engine, workflows: Parameters<Engine["startWorker"]>[0]["workflows"]): Worker {
  const w = engine.startWorker({ workflows, sweep: false, intervalMs: 200 });
  onTestFinished(() => w.stop());
  return w;
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 120_000, interval: 25, message: what }).toBe(true);
};

const Paid = z.object({ reference: z.string() });

function invoiceWorkflow(name: string) {
  const calls = { request: 0, settle: 0 };
  const wf = workflow(name)
    .input(z.object({ invoiceId: z.string(), amountCents: z.number().int().positive() }))
    .phase("request", async ({ tx, tenantId, input }) => {
      calls.request++;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${input.invoiceId}, ${tenantId}, 'c', ${input.amountCents})`.execute(
        tx,
      );
      return {};
    })
    .waitFor("paid", { schema: Paid, timeoutMs: 3_600_000 })
    .phase("settle", async ({ tx, state, input }) => {
      calls.settle++;
      await sql`UPDATE orders SET status = 'paid', charge_id = ${state.paid.reference} WHERE id = ${input.invoiceId}`.execute(
        tx,
      );
      return {};
    })
    .respond(({ input, state }) => ({
      status: 200,
      body: { invoiceId: input.invoiceId, reference: state.paid.reference },
    }));
  return { wf, calls };
}

async function order(id: string): Promise<{ status: string; charge_id: string | null }[]> {
  const { rows } = await sql<{ status: string; charge_id: string | null }>`
    SELECT status, charge_id FROM orders WHERE id = ${id}`.execute(t.db);
  return rows;
}

async function signalCount(key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

describe("a run enqueued and signalled through SQL, executed by a TypeScript worker", () => {
  it("starts and finishes once; a duplicate signal counts once; TypeScript sees the same request and signal", async () => {
    const { wf, calls } = invoiceWorkflow("sql_invoice");
    const engine = createEngine({ db: t.db });

    // No worker has registered the workflow yet: SQL cannot know its outline.
    const unknown = await sqlError(sqlEnqueue(t.db, T, "inv-1", "sql_invoice", { invoiceId: "inv-1", amountCents: 1 }));
    expect(unknown.sqlstate).toBe("IP009");
    expect(unknown.message).toMatch(/^workflow_definition: workflow 'sql_invoice' is not registered/);

    worker(engine, [wf]);
    await until(async () => (await registeredVersions(t.db, "sql_invoice")).length === 1, "the worker registers");

    // In the caller's transaction: a rollback leaves nothing, a commit leaves the run and the business row.
    await t.db
      .transaction()
      .execute(async (tx) => {
        expect(await sqlEnqueue(tx, T, "inv-rolled", "sql_invoice", { invoiceId: "inv-rolled", amountCents: 1 })).toBe(
          true,
        );
        throw new Error("the caller's transaction fails");
      })
      .catch(() => undefined);
    expect(await sqlInspect(t.db, T, "inv-rolled")).toBeUndefined();

    const input = { invoiceId: "inv-1", amountCents: 1250 };
    expect(await t.db.transaction().execute((tx) => sqlEnqueue(tx, T, "inv-1", "sql_invoice", input))).toBe(true);
    // Key order and number spelling change nothing: the same request, from SQL and from TypeScript.
    const { rows } = await sql<{ created: boolean }>`
      SELECT idempo.enqueue(${T}, 'inv-1', 'sql_invoice', '{"amountCents": 1250.0, "invoiceId": "inv-1"}') AS created`.execute(
      t.db,
    );
    expect(rows[0]?.created).toBe(false);
    expect(await engine.enqueue(t.db, wf, { tenantId: T, key: "inv-1", input })).toEqual({ created: false });
    await expect(
      engine.enqueue(t.db, wf, { tenantId: T, key: "inv-1", input: { ...input, amountCents: 1251 } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyMismatchError);

    await until(async () => (await sqlInspect(t.db, T, "inv-1"))?.waiting_for_name === "paid", "the run waits");

    // The provider's webhook, twice at once, on two connections; then once more from TypeScript.
    const other = t.connect(2);
    const answers = await Promise.all([
      sqlSignal(t.db, T, "inv-1", "paid", { reference: "pay_1" }),
      sqlSignal(other, T, "inv-1", "paid", { reference: "pay_1" }),
    ]);
    expect(answers.map((a) => a.duplicate).sort()).toEqual([false, true]);
    expect(answers.filter((a) => a.woke)).toHaveLength(1);
    expect(await engine.signal(T, "inv-1", "paid", { reference: "pay_1" })).toEqual({ duplicate: true, woke: false });

    expect(await engine.wait(T, "inv-1", { timeoutMs: 120_000 })).toMatchObject({
      status: 200,
      body: { invoiceId: "inv-1", reference: "pay_1" },
    });
    expect(calls).toEqual({ request: 1, settle: 1 });
    expect(await order("inv-1")).toEqual([{ status: "paid", charge_id: "pay_1" }]);
    expect(await signalCount("inv-1")).toBe(1);

    const rec = await sqlInspect(t.db, T, "inv-1");
    // A ULID, as the engine's run ids are.
    expect(rec.run_id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(rec).toMatchObject({
      status: "completed",
      outcome: "succeeded",
      response_status: 200,
      response_body: { invoiceId: "inv-1", reference: "pay_1" },
      attempt: 1,
      expired: false,
    });
    expect(
      (rec.history as { kind: string; name: string; outcome: string }[]).map((h) => `${h.kind}:${h.name}:${h.outcome}`),
    ).toEqual(["phase:request:succeeded", "wait:paid:succeeded", "phase:settle:succeeded"]);
    // A repeat after the run completed is still a duplicate, never an error.
    expect(await sqlSignal(t.db, T, "inv-1", "paid", { reference: "pay_1" })).toEqual({
      duplicate: true,
      woke: false,
      expired: false,
    });
  });

  it("a signal stored unchecked that fails the schema is discarded and recorded; a later one is taken", async () => {
    const { wf, calls } = invoiceWorkflow("sql_invoice_discard");
    const engine = createEngine({ db: t.db });
    worker(engine, [wf]);
    await until(async () => (await registeredVersions(t.db, "sql_invoice_discard")).length === 1, "registered");
    expect(await sqlEnqueue(t.db, T, "inv-d", "sql_invoice_discard", { invoiceId: "inv-d", amountCents: 5 })).toBe(
      true,
    );
    await until(async () => (await sqlInspect(t.db, T, "inv-d"))?.waiting_for_name === "paid", "the run waits");

    // SQL cannot check the wait's schema: the bad payload is stored and wakes the run.
    expect(await sqlSignal(t.db, T, "inv-d", "paid", { reference: 42 })).toEqual({
      duplicate: false,
      woke: true,
      expired: false,
    });
    const discarded = async () => {
      const rec = await engine.inspect(T, "inv-d");
      return (rec?.history ?? []).filter((h) => h.outcome === "discarded");
    };
    await until(async () => (await discarded()).length === 1 && (await signalCount("inv-d")) === 0, "discarded");
    const entry = (await discarded())[0];
    expect(entry).toMatchObject({ kind: "wait", name: "paid" });
    expect(entry?.error).toMatch(
      /^signal_discarded: the stored signal 'paid' fails the wait's schema \(\$\.reference: /,
    );
    const waiting = await sqlInspect(t.db, T, "inv-d");
    expect(waiting).toMatchObject({ status: "suspended", waiting_for_kind: "signal", waiting_for_name: "paid" });
    expect((waiting.history as { outcome: string }[]).some((h) => h.outcome === "discarded")).toBe(true);
    expect(calls.settle).toBe(0);

    // The corrected signal is a first delivery, not a mismatch.
    expect(await sqlSignal(t.db, T, "inv-d", "paid", { reference: "pay_d" })).toMatchObject({ duplicate: false });
    expect(await engine.wait(T, "inv-d", { timeoutMs: 120_000 })).toMatchObject({
      status: 200,
      body: { reference: "pay_d" },
    });
    expect(calls).toEqual({ request: 1, settle: 1 });
    expect(await order("inv-d")).toEqual([{ status: "paid", charge_id: "pay_d" }]);
  });

  it("an input that fails the workflow's schema parks the run when a worker takes it", async () => {
    const { wf, calls } = invoiceWorkflow("sql_invoice_bad_input");
    const engine = createEngine({ db: t.db });
    worker(engine, [wf]);
    await until(async () => (await registeredVersions(t.db, "sql_invoice_bad_input")).length === 1, "registered");
    expect(
      await sqlEnqueue(t.db, T, "inv-bad", "sql_invoice_bad_input", { invoiceId: "inv-bad", amountCents: -5 }),
    ).toBe(true);
    await until(async () => (await sqlInspect(t.db, T, "inv-bad"))?.status === "parked", "parked");
    const rec = await sqlInspect(t.db, T, "inv-bad");
    expect(rec.parked_reason).toMatch(
      /^the stored input fails the input schema of workflow 'sql_invoice_bad_input' version 1 \(\$\.amountCents: /,
    );
    expect(rec.attempt).toBe(1);
    expect(calls.request).toBe(0);
    // Parked, it answers as any parked run; cancel through SQL finishes it.
    const canceled = await sql<{ status: string; outcome: string; response_status: number }>`
      SELECT status, outcome, response_status FROM idempo.cancel(${T}, 'inv-bad')`.execute(t.db);
    expect(canceled.rows).toEqual([{ status: "completed", outcome: "canceled", response_status: 409 }]);
    expect((await engine.inspect(T, "inv-bad"))?.response?.body).toMatchObject({ code: "run_canceled", status: 409 });
  });

  it("a worker registers every deployed version; enqueue takes the newest", async () => {
    const v1 = workflow("sql_versions")
      .phase("a", () => ({ v: 1 }))
      .respond(({ state }) => ({ status: 200, body: state }));
    const v2 = workflow("sql_versions")
      .version(2)
      .replaces(v1)
      .phase("a", () => ({ v: 2 }))
      .phase("b", () => ({}))
      .respond(({ state }) => ({ status: 200, body: state }));
    const engine = createEngine({ db: t.db });
    worker(engine, [v2]);
    await until(async () => (await registeredVersions(t.db, "sql_versions")).length === 2, "both versions");
    expect(await sqlEnqueue(t.db, T, "ver-1", "sql_versions", null)).toBe(true);
    expect(await engine.wait(T, "ver-1", { timeoutMs: 120_000 })).toMatchObject({ status: 200, body: { v: 2 } });
    expect(await engine.inspect(T, "ver-1")).toMatchObject({ workflowVersion: 2, definition: ["phase:a", "phase:b"] });
  });

  it("lists stuck and parked runs, page by page, with cursors listKeys also takes", async () => {
    const engine = createEngine({ db: t.db });
    await sql`
      INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint, input,
                               status, owner_token, locked_until, retention_ms, parked_reason, created_at)
      SELECT 'lst', 'k' || i, 'r' || i, 'sql_list', '[]', 'h', 'f', '{}',
             CASE WHEN i % 2 = 0 THEN 'parked' ELSE 'in_flight' END,
             CASE WHEN i % 2 = 0 THEN NULL ELSE 'o' END,
             CASE WHEN i % 2 = 0 THEN NULL ELSE now() - interval '1 minute' END,
             1000, CASE WHEN i % 2 = 0 THEN 'attempts ran out' END, now() - i * interval '1 second'
      FROM generate_series(1, 6) AS i`.execute(t.db);
    const page = async (filter: string, cursor: string | null) =>
      (
        await sql<{ key: string; status: string; cursor: string }>`
          SELECT key, status, cursor FROM idempo.list_runs(tenant_id => 'lst', page_size => 2, cursor => ${cursor},
            stuck => ${filter === "stuck"}, status => ${filter === "stuck" ? null : filter})`.execute(t.db)
      ).rows;
    const first = await page("stuck", null);
    expect(first.map((r) => r.key)).toEqual(["k1", "k3"]);
    const second = await page("stuck", first[1]?.cursor ?? null);
    expect(second.map((r) => r.key)).toEqual(["k5"]);
    expect((await page("parked", null)).map((r) => `${r.key}:${r.status}`)).toEqual(["k2:parked", "k4:parked"]);
    // The cursors are listKeys' own: either one continues the other's listing.
    const ts = await engine.listKeys({ tenantId: "lst", stuck: true, limit: 1 });
    expect(ts.nextCursor).toBe(first[0]?.cursor);
    const fromSql = await engine.listKeys({ tenantId: "lst", stuck: true, cursor: first[1]?.cursor as string });
    expect(fromSql.items.map((r) => r.key)).toEqual(["k5"]);
    expect((await page("stuck", ts.nextCursor)).map((r) => r.key)).toEqual(["k3", "k5"]);
  });
});
