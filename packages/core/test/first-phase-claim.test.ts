/**
 * A new key claimed inside the run's first phase (SPEC, third round,
 * decisions): the claim commits with that phase. A duplicate arriving
 * during the phase waits on the key's unique index, then gets what it would
 * get after the commit; after a rollback one waiting caller runs the key
 * itself. Real parallel connections, no mocks.
 */
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Engine, EngineOptions } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { countOrders } from "./support/effects.ts";
import { settle, waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 12 });
const T = "acme";

/** An engine that made its first claim (which goes alone, reading the driver): the next ones fold. */
async function warmEngine(options: EngineOptions<unknown>) {
  const engine = createEngine(options);
  const warm = workflow("fp_warm").respond(() => ({ status: 200, body: null }));
  await engine.runOnce(warm, { tenantId: "warm", key: randomUUID(), input: {} });
  return engine;
}

/** A gate a phase waits on, opened by the test. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => {
    open = r;
  });
  return { wait, open };
}

/** Sessions of this database waiting on a lock: a duplicate blocked on the key's unique index. */
async function lockWaiters(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(t.db);
  return rows[0]?.n ?? 0;
}

const untilWaiters = (n: number) => waitFor(async () => ((await lockWaiters()) >= n ? true : undefined));

/** A workflow whose first phase inserts an order, waits on `hold` the first `held` times, then maybe throws. */
function slowCheckout(
  name: string,
  hold: Promise<void>,
  opts: { held?: number; throwFirst?: boolean; more?: Promise<void> },
) {
  let calls = 0;
  const counts = { phase: 0, second: 0 };
  let wf = workflow(name).phase("create_order", async ({ tx, tenantId, key }) => {
    const n = ++calls;
    counts.phase++;
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${randomUUID()}, ${tenantId}, ${key}, 10)`.execute(
      tx,
    );
    if (n <= (opts.held ?? 1)) {
      await hold;
      if (opts.throwFirst) throw new Error("the first phase fails");
    }
    return { n };
  });
  if (opts.more) {
    const more = opts.more;
    wf = wf.phase("second", async () => {
      counts.second++;
      await more;
      return {};
    });
  }
  return { wf: wf.respond(({ state }) => ({ status: 201, body: { n: (state as { n: number }).n } })), counts };
}

const run = (engine: Engine, wf: ReturnType<typeof slowCheckout>["wf"], key: string) =>
  engine.runOnce(wf, { tenantId: T, key, input: {} });

describe("a duplicate during a slow first phase that holds the claim", () => {
  it("commit ending: the duplicate waits for the commit and replays it", async () => {
    const engine = await warmEngine({ db: t.db });
    const hold = gate();
    const { wf, counts } = slowCheckout("fp_commit", hold.wait, {});
    const first = run(engine, wf, "k-commit");
    await waitFor(async () => (counts.phase === 1 ? true : undefined));
    // Nothing is visible before the first phase commits.
    expect(await engine.inspect(T, "k-commit")).toBeNull();
    const dup = run(engine, wf, "k-commit");
    await untilWaiters(1);
    hold.open();
    const [a, b] = await Promise.all([first, dup]);
    expect(a).toMatchObject({ status: 201, replayed: false, body: { n: 1 } });
    expect(b).toMatchObject({ status: 201, replayed: true, body: { n: 1 } });
    expect(counts.phase).toBe(1);
    expect(await countOrders(t.db, { cartId: "k-commit" })).toBe(1);
    expect(await engine.inspect(T, "k-commit")).toMatchObject({ status: "completed", attempt: 1 });
  });

  it("commit ending with more items to run: the duplicate gets 409 once the first phase commits", async () => {
    const engine = await warmEngine({ db: t.db });
    const hold = gate();
    const more = gate();
    const { wf, counts } = slowCheckout("fp_more", hold.wait, { more: more.wait });
    const first = run(engine, wf, "k-more");
    await waitFor(async () => (counts.phase === 1 ? true : undefined));
    const dup = run(engine, wf, "k-more").catch((e: unknown) => e);
    await untilWaiters(1);
    hold.open();
    const refused = await dup;
    expect(refused).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect(counts.second).toBe(1);
    more.open();
    expect(await first).toMatchObject({ status: 201, replayed: false });
    expect(counts.phase).toBe(1);
    expect(await countOrders(t.db, { cartId: "k-more" })).toBe(1);
  });

  it("rollback ending: the first phase fails, leaves no record, and the duplicate runs the key itself, once", async () => {
    const engine = await warmEngine({ db: t.db });
    const hold = gate();
    const { wf, counts } = slowCheckout("fp_rollback", hold.wait, { throwFirst: true });
    const first = run(engine, wf, "k-rb").catch((e: unknown) => e);
    await waitFor(async () => (counts.phase === 1 ? true : undefined));
    const dup = run(engine, wf, "k-rb");
    await untilWaiters(1);
    hold.open();
    expect(await first).toMatchObject({ message: "the first phase fails" });
    expect(await dup).toMatchObject({ status: 201, replayed: false, body: { n: 2 } });
    expect(counts.phase).toBe(2);
    expect(await countOrders(t.db, { cartId: "k-rb" })).toBe(1);
    expect(await engine.inspect(T, "k-rb")).toMatchObject({ status: "completed", attempt: 1 });
  });
});

describe("a takeover race on a key whose first phase rolled back", () => {
  it("eight callers wait on the key; after the rollback exactly one runs it, the rest replay it or get 409", async () => {
    const engine = await warmEngine({ db: t.db });
    const hold = gate();
    const { wf, counts } = slowCheckout("fp_race", hold.wait, { throwFirst: true });
    const first = run(engine, wf, "k-race").catch((e: unknown) => e);
    await waitFor(async () => (counts.phase === 1 ? true : undefined));
    const callers = Array.from({ length: 8 }, () => run(engine, wf, "k-race"));
    await untilWaiters(8);
    hold.open();
    expect(await first).toMatchObject({ message: "the first phase fails" });
    const { values, errors } = await settle(callers);
    for (const e of errors) expect(e).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect(values.filter((v) => !v.replayed)).toHaveLength(1);
    for (const v of values) expect(v).toMatchObject({ status: 201, body: { n: 2 } });
    expect(await countOrders(t.db, { cartId: "k-race" })).toBe(1);
    // The failed phase's work rolled back; the winner's committed.
    expect(counts.phase).toBe(2);
  });
});
