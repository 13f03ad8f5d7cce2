/**
 * The SQL interface refuses what the engine refuses, with the same words:
 * each refusal has its own SQLSTATE (class IP, docs/sql-api.md) and a
 * message that is the TypeScript error's code, a colon and its message.
 * Each case makes the engine and SQL refuse the same call and compares.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { IdempoError } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { registeredVersions, sqlEnqueue, sqlError, sqlInspect, sqlSignal } from "./support/sql-api.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

/** The engine's refusal and the SQL one: the same code and message, under the given SQLSTATE. */
async function sameRefusal(
  engineCall: () => Promise<unknown>,
  sqlCall: () => Promise<unknown>,
  sqlstate: string,
): Promise<void> {
  const ts = (await engineCall().then(
    () => {
      throw new Error("the engine did not refuse");
    },
    (e: unknown) => e,
  )) as IdempoError;
  expect(await sqlError(sqlCall())).toEqual({ sqlstate, message: `${ts.code}: ${ts.message}` });
}

const paid = workflow("sql_err_paid")
  .input(z.object({ n: z.number() }))
  .waitFor("paid", { schema: z.object({ reference: z.string() }) })
  .respond(({ state }) => ({ status: 200, body: state.paid }));
const once = workflow("sql_err_once", { retentionMs: 1 })
  .phase("a", () => ({ done: true }))
  .respond(() => ({ status: 201, body: { done: true } }));

describe("the SQL interface's refusals are the engine's", () => {
  it("each code, SQLSTATE and message", async () => {
    const engine = createEngine({ db: t.db, workflows: [paid, once] });
    const small = createEngine({ db: t.db, maxPayloadBytes: 64 });
    const w = engine.startWorker({ workflows: [paid, once], sweep: false });
    try {
      await expect
        .poll(async () => (await registeredVersions(t.db, "sql_err_once")).length, { timeout: 60_000 })
        .toBe(1);
    } finally {
      await w.stop();
    }

    // invalid_key (IP001): the key rules, in their order.
    const tooLong = "é".repeat(128);
    for (const [tenantId, key] of [
      ["", "k"],
      ["acme", ""],
      ["acme", tooLong],
      ["acme", "a\u0085b"],
      ["acme", "\u00a0\u3000 "],
      ["\t", "k"],
    ] as const) {
      await sameRefusal(
        () => engine.enqueue(t.db, paid, { tenantId, key, input: { n: 1 } }),
        () => sqlEnqueue(t.db, tenantId, key, "sql_err_paid", { n: 1 }),
        "IP001",
      );
    }
    await sameRefusal(
      () => engine.signal(T, "k", " ", {}),
      () => sqlSignal(t.db, T, "k", " ", {}),
      "IP001",
    );

    // payload_too_large (IP003): measured on the same canonical text.
    const big = { n: 1, note: "ü".repeat(40) };
    await sameRefusal(
      () => small.enqueue(t.db, paid, { tenantId: T, key: "big", input: big }),
      () => sqlEnqueue(t.db, T, "big", "sql_err_paid", big, 64),
      "IP003",
    );

    // key_mismatch (IP004): another payload, another workflow, another signal payload.
    expect(await sqlEnqueue(t.db, T, "p1", "sql_err_paid", { n: 1 })).toBe(true);
    await sameRefusal(
      () => engine.enqueue(t.db, paid, { tenantId: T, key: "p1", input: { n: 2 } }),
      () => sqlEnqueue(t.db, T, "p1", "sql_err_paid", { n: 2 }),
      "IP004",
    );
    await sameRefusal(
      () => engine.enqueue(t.db, once, { tenantId: T, key: "p1", input: null }),
      () => sqlEnqueue(t.db, T, "p1", "sql_err_once", null),
      "IP004",
    );
    expect(await sqlSignal(t.db, T, "p1", "paid", { reference: "r1" })).toMatchObject({ duplicate: false });
    await sameRefusal(
      () => engine.signal(T, "p1", "paid", { reference: "r2" }),
      () => sqlSignal(t.db, T, "p1", "paid", { reference: "r2" }),
      "IP004",
    );

    // invalid_input (IP002): a name the workflow does not wait for; a payload over the bound for a signal.
    await sameRefusal(
      () => engine.signal(T, "p1", "shipped", {}),
      () => sqlSignal(t.db, T, "p1", "shipped", {}),
      "IP002",
    );
    await sameRefusal(
      () => small.signal(T, "p1", "paid", big),
      () => sqlSignal(t.db, T, "p1", "paid", big, 64),
      "IP003",
    );

    // run_not_found (IP007) and run_state (IP008).
    await sameRefusal(
      () => engine.signal(T, "absent", "paid", {}),
      () => sqlSignal(t.db, T, "absent", "paid", {}),
      "IP007",
    );
    await sameRefusal(
      () => engine.cancel(T, "absent"),
      () => sqlCancel("absent"),
      "IP007",
    );
    expect(await engine.runOnce(once, { tenantId: T, key: "done", input: null })).toMatchObject({ status: 201 });
    const p2 = await engine.cancel(T, "p1");
    expect(p2.status).toBe("completed");
    await sameRefusal(
      () => engine.cancel(T, "p1"),
      () => sqlCancel("p1"),
      "IP008",
    );
    expect(await sqlEnqueue(t.db, T, "p3", "sql_err_paid", { n: 3 })).toBe(true);
    await engine.cancel(T, "p3");
    await sameRefusal(
      () => engine.signal(T, "p3", "paid", { reference: "late" }),
      () => sqlSignal(t.db, T, "p3", "paid", { reference: "late" }),
      "IP008",
    );

    // key_expired (IP005): past retention, as the record and, once swept, as its tombstone.
    await expect.poll(async () => (await sqlInspect(t.db, T, "done"))?.expired, { timeout: 60_000 }).toBe(true);
    await sameRefusal(
      () => engine.runOnce(once, { tenantId: T, key: "done", input: null }),
      () => sqlEnqueue(t.db, T, "done", "sql_err_once", null),
      "IP005",
    );
    expect(await sqlSignal(t.db, T, "done", "any", {})).toEqual({ duplicate: false, woke: false, expired: true });
    await engine.sweep();
    expect(await sqlInspect(t.db, T, "done")).toMatchObject({
      status: "expired",
      workflow: "sql_err_once",
      expired: true,
    });
    await sameRefusal(
      () => engine.enqueue(t.db, once, { tenantId: T, key: "done", input: null }),
      () => sqlEnqueue(t.db, T, "done", "sql_err_once", null),
      "IP005",
    );
    await sameRefusal(
      () => engine.enqueue(t.db, paid, { tenantId: T, key: "done", input: { n: 1 } }),
      () => sqlEnqueue(t.db, T, "done", "sql_err_paid", { n: 1 }),
      "IP004",
    );
    expect(await sqlSignal(t.db, T, "done", "any", {})).toEqual({ duplicate: false, woke: false, expired: true });
  });

  it("what only SQL can get wrong: a workflow no worker registered, SQL NULL, numbers no double holds, the bound", async () => {
    expect(await sqlError(sqlEnqueue(t.db, T, "x", "sql_err_nobody", {}))).toEqual({
      sqlstate: "IP009",
      message:
        "workflow_definition: workflow 'sql_err_nobody' is not registered: enqueue creates runs of the workflows " +
        "that a worker (engine.startWorker) running them has registered in this database",
    });
    expect(await sqlError(sql`SELECT idempo.enqueue(${T}, 'x', 'sql_err_paid', NULL)`.execute(t.db))).toEqual({
      sqlstate: "IP002",
      message: "invalid_input: invalid input: $: SQL NULL is not a JSON value (pass 'null'::jsonb for JSON null)",
    });
    for (const [text, path] of [
      ['{"a": [1, 1e400]}', "$.a[1]"],
      ['{"a b": -1e-400}', '$."a b"'],
    ]) {
      expect(await sqlError(sqlSignalText(T, "x", "paid", text as string))).toEqual({
        sqlstate: "IP002",
        message: `invalid_input: invalid input: payload${(path as string).slice(1)}: number out of the range of a double (JSON numbers are read as IEEE 754 doubles)`,
      });
    }
    // As deep as the engine's bound allows, and one level more: the same refusal, path shortened the same way.
    const nested = (levels: number) => `${"[".repeat(levels)}1${"]".repeat(levels)}`;
    expect(await sqlSignalText(T, "x", "paid", nested(512)).catch((e: Error) => e.message)).toMatch(/^run_not_found: /);
    await sameRefusal(
      () => createEngine({ db: t.db }).signal(T, "x", "paid", JSON.parse(nested(513))),
      () => sqlSignalText(T, "x", "paid", nested(513)),
      "IP002",
    );
    expect(await sqlError(sqlSignal(t.db, T, "x", "paid", {}, 0))).toEqual({
      sqlstate: "IP010",
      message: "invalid_option: max_payload_bytes must be an integer from 1 to 1073741823, got 0",
    });
  });
});

function sqlCancel(key: string) {
  return sql`SELECT * FROM idempo.cancel(${T}, ${key})`.execute(t.db);
}

function sqlSignalText(tenantId: string, key: string, name: string, payload: string) {
  return sql`SELECT * FROM idempo.signal(${tenantId}, ${key}, ${name}, ${payload}::jsonb)`.execute(t.db);
}
