/**
 * End to end: the `idempo` commands that change records (`keys release`,
 * `resume`, `keys delete`, `migrate`) and `outbox list` after them, with the
 * real binary against a real database seeded by real workflow runs (see
 * support/seed.ts). They run in order, each on what the one before left.
 */
import { describe, expect, it } from "vitest";
import { idempo, jsonLines } from "./support/cli.ts";
import { MIGRATIONS } from "./support/migrations.ts";
import { useSeededDatabase } from "./support/seed.ts";

const seeded = useSeededDatabase("idempo_cli_changes");

describe("changing records", () => {
  const env = () => ({ DATABASE_URL: seeded.url });

  it("release expires a live lease now, so a retry takes over", async () => {
    const res = await idempo(["keys", "release", "acme", "order-1004", "--yes"], env());
    expect(res.code).toBe(0);
    const flat = res.stdout.replace(/\n {2}/g, " ");
    expect(flat).toMatch(
      /^released acme\/order-1004: lease was \d+m \d+s left, now expired \(owner \w+\); that owner's next/,
    );
    expect(flat).toMatch(/a retry now will take over as attempt 2 and resume after create_order/);
    const rec = await seeded.engine.inspect("acme", "order-1004");
    expect(rec?.leaseRemainingMs).toBeLessThanOrEqual(0);
  });

  it("release of a completed key is an operational error", async () => {
    const res = await idempo(["keys", "release", "acme", "order-1001", "--yes"], env());
    expect(res).toMatchObject({ code: 1, stdout: "" });
    expect(res.stderr).toMatch(/is completed: only in-flight keys have a lease/);
  });

  it("resume finishes every stale checkout from its recovery point", async () => {
    const res = await idempo(["resume", "--workflows", "test/fixtures/checkout-workflow.ts", "--json"], env());
    expect(res.code).toBe(0);
    const runs = jsonLines(res.stdout).map((x) => `${x.tenantId}/${x.key} ${x.result} ${x.status}`);
    expect(runs.sort()).toEqual([
      "acme/order-1002 finished 201",
      "acme/order-1004 finished 201",
      "globex/order-2001 finished 201",
    ]);
    const resumed = await seeded.engine.inspect("acme", "order-1002");
    expect(resumed).toMatchObject({ status: "completed", attempt: 2, recoveryPoint: "record_charge" });
    expect(resumed?.history?.map((h) => `${h.kind}:${h.name}:${h.attempt}:${h.outcome}`)).toEqual([
      "phase:create_order:1:succeeded",
      "step:charge:1:interrupted",
      "step:charge:2:succeeded",
      "phase:record_charge:2:succeeded",
    ]);
    expect((await seeded.engine.inspect("acme", "order-1003"))?.status).toBe("in_flight"); // live lease: left alone
  });

  it("outbox list shows the receipts the finished runs queued", async () => {
    const res = await idempo(["outbox", "list", "--json"], env());
    const msgs = jsonLines(res.stdout);
    expect(msgs).toHaveLength(5);
    expect(new Set(msgs.map((m) => m.topic))).toEqual(new Set(["receipt.email"]));
    expect(msgs[0]).toMatchObject({ status: "pending", attempts: 0, deliveredAt: null });
  });

  it("delete forgets a key and says what it removed", async () => {
    const res = await idempo(["keys", "delete", "globex", "order-1001", "--yes"], env());
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      "deleted globex/order-1001 (checkout, completed, recovery point record_charge) and its history: a reuse of the key runs again\n",
    );
    expect(await seeded.engine.inspect("globex", "order-1001")).toBeNull();
    expect(await seeded.engine.inspect("acme", "order-1001")).not.toBeNull(); // same key, other tenant
  });

  it("migrate applies to a new schema once", async () => {
    const first = await idempo(["migrate", "--schema", "ops_copy"], env());
    expect(first).toMatchObject({
      code: 0,
      stdout: `applied ${MIGRATIONS.length} migrations to schema ops_copy:\n${MIGRATIONS.map((m) => `  ${m}\n`).join("")}`,
    });
    const again = await idempo(["migrate", "--schema", "ops_copy", "--json"], env());
    expect(JSON.parse(again.stdout)).toEqual({ applied: [] });
  });
});
