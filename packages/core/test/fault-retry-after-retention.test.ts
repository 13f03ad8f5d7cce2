/**
 * A retry that arrives after retention must not run the workflow again (the
 * card charged twice): the expired record leaves a tombstone for the
 * workflow's tombstoneMs, and the key answers 410 until then, whether or not
 * the sweeper has run. Times are moved in the database instead of waited
 * for, except in the race at the moment of expiry.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createEngine,
  IdempotencyKeyExpiredError,
  IdempotencyKeyMismatchError,
  RunNotFoundError,
  workflow,
} from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 24 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function charges(counter: { runs: number }, options: { retentionMs?: number; tombstoneMs?: number } = {}) {
  return workflow("tomb_charge", options)
    .input(z.object({ cents: z.number() }))
    .phase("charge", async ({ tx, input, tenantId, key }) => {
      counter.runs++;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
                VALUES (${`${tenantId}-${key}-${counter.runs}`}, ${tenantId}, ${key}, ${input.cents})`.execute(tx);
      return { charged: input.cents };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
}

/** The record's retention ended `agoMs` ago (DB clock), as if the time had passed. */
async function expire(tenantId: string, key: string, agoMs = 1000): Promise<void> {
  await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - ${agoMs}::float8 * interval '1 millisecond'
            WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
}

/** The tombstone's time (swept or not) ended a second ago. */
async function endTombstone(tenantId: string, key: string): Promise<void> {
  await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - interval '1 second' - tombstone_ms * interval '1 millisecond'
            WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  await sql`UPDATE idempo.tombstones SET kept_until = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${tenantId} AND key_digest = idempo.key_digest(${key})`.execute(t.db);
}

async function rows(tenantId: string, key: string) {
  const { rows: found } = await sql<{ runs: number; tombstones: number; orders: number }>`
    SELECT (SELECT count(*)::int FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}) AS runs,
           (SELECT count(*)::int FROM idempo.tombstones
            WHERE tenant_id = ${tenantId} AND key_digest = idempo.key_digest(${key})) AS tombstones,
           (SELECT count(*)::int FROM orders WHERE tenant_id = ${tenantId} AND cart_id = ${key}) AS orders`.execute(
    t.db,
  );
  return found[0];
}

describe("a request after retention gets 410 while the key's tombstone lasts", () => {
  it("before the sweep and after it, with the outcome and times; another payload is still 422", async () => {
    const counter = { runs: 0 };
    const wf = charges(counter);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "a", key: "k1", input: { cents: 100 } });
    await expire("a", "k1");

    const before = await engine.runOnce(wf, { tenantId: "a", key: "k1", input: { cents: 100 } }).catch((e) => e);
    expect(before).toBeInstanceOf(IdempotencyKeyExpiredError);
    expect(before).toMatchObject({ code: "key_expired", httpStatus: 410, outcome: "succeeded" });
    expect((before as IdempotencyKeyExpiredError).tombstoneUntil.getTime()).toBeGreaterThan(Date.now());
    await expect(engine.runOnce(wf, { tenantId: "a", key: "k1", input: { cents: 999 } })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );

    expect(await engine.sweep()).toBeGreaterThanOrEqual(1);
    expect(await rows("a", "k1")).toEqual({ runs: 0, tombstones: 1, orders: 1 });
    const after = await engine.runOnce(wf, { tenantId: "a", key: "k1", input: { cents: 100 } }).catch((e) => e);
    expect(after).toBeInstanceOf(IdempotencyKeyExpiredError);
    expect(after).toMatchObject({
      outcome: "succeeded",
      completedAt: (before as IdempotencyKeyExpiredError).completedAt,
      expiredAt: (before as IdempotencyKeyExpiredError).expiredAt,
    });
    await expect(engine.runOnce(wf, { tenantId: "a", key: "k1", input: { cents: 999 } })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );
    expect(counter.runs).toBe(1);
    expect(await rows("a", "k1")).toEqual({ runs: 0, tombstones: 1, orders: 1 });
  });

  it("after the tombstone's time the key runs again as new, swept or not", async () => {
    const counter = { runs: 0 };
    const wf = charges(counter);
    const engine = createEngine({ db: t.db });
    for (const key of ["unswept", "swept"]) {
      await engine.runOnce(wf, { tenantId: "b", key, input: { cents: 1 } });
      await expire("b", key);
    }
    await engine.sweep();
    await endTombstone("b", "unswept");
    await endTombstone("b", "swept");
    for (const key of ["unswept", "swept"]) {
      const again = await engine.runOnce(wf, { tenantId: "b", key, input: { cents: 2 } });
      expect(again).toMatchObject({ status: 201, replayed: false, body: { charged: 2 } });
    }
    expect(counter.runs).toBe(4);
    // The stale tombstone may stay until the sweeper deletes it; the live record answers.
    expect((await engine.runOnce(wf, { tenantId: "b", key: "swept", input: { cents: 2 } })).replayed).toBe(true);
    await engine.sweep();
    expect(await rows("b", "swept")).toEqual({ runs: 1, tombstones: 0, orders: 2 });
  });

  it("tombstoneMs 0: past retention the key runs again at once, and the sweep leaves nothing", async () => {
    const counter = { runs: 0 };
    const wf = charges(counter, { tombstoneMs: 0 });
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "c", key: "k1", input: { cents: 1 } });
    await engine.runOnce(wf, { tenantId: "c", key: "k2", input: { cents: 1 } });
    await expire("c", "k1");
    await expire("c", "k2");
    expect((await engine.runOnce(wf, { tenantId: "c", key: "k1", input: { cents: 5 } })).replayed).toBe(false);
    await engine.sweep();
    expect(await rows("c", "k2")).toEqual({ runs: 0, tombstones: 0, orders: 1 });
    expect((await engine.runOnce(wf, { tenantId: "c", key: "k2", input: { cents: 5 } })).replayed).toBe(false);
    expect(counter.runs).toBe(4);
  });

  it("tombstoneMs is a workflow option from 0 to 100 years", () => {
    expect(() => charges({ runs: 0 }, { tombstoneMs: -1 })).toThrow(/tombstoneMs/);
    expect(() => charges({ runs: 0 }, { tombstoneMs: 1.5 })).toThrow(/tombstoneMs/);
    expect(() => charges({ runs: 0 }, { tombstoneMs: 0 })).not.toThrow();
  });

  it("enqueue and wait answer 410 for a tombstoned key too; forget lets it run again", async () => {
    const counter = { runs: 0 };
    const wf = charges(counter);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "d", key: "k1", input: { cents: 1 } });
    await engine.runOnce(wf, { tenantId: "d", key: "k2", input: { cents: 1 } });
    await expire("d", "k1");
    await expire("d", "k2");
    await engine.sweep();
    for (const key of ["k1", "k2"]) {
      await expect(engine.enqueue(t.db, wf, { tenantId: "d", key, input: { cents: 1 } })).rejects.toBeInstanceOf(
        IdempotencyKeyExpiredError,
      );
      await expect(engine.wait("d", key, { timeoutMs: 0 })).rejects.toBeInstanceOf(IdempotencyKeyExpiredError);
    }
    await engine.forget("d", "k1");
    expect(await rows("d", "k1")).toEqual({ runs: 0, tombstones: 0, orders: 1 });
    expect((await engine.runOnce(wf, { tenantId: "d", key: "k1", input: { cents: 3 } })).replayed).toBe(false);
    expect(counter.runs).toBe(3);
  });
});

describe("inspect shows a tombstone as such", () => {
  it("the expired record while it is kept, then the tombstone (status 'expired')", async () => {
    const wf = charges({ runs: 0 });
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "e", key: "k1", input: { cents: 1 } });
    const live = await engine.inspect("e", "k1");
    expect(live).toMatchObject({ status: "completed", expired: false });
    expect(live?.status === "completed" && live.tombstoneUntil).toBeInstanceOf(Date);
    await expire("e", "k1");
    const expired = await engine.inspect("e", "k1");
    expect(expired).toMatchObject({ status: "completed", expired: true });
    await engine.sweep();
    const tomb = await engine.inspect("e", "k1");
    expect(tomb).toEqual({
      status: "expired",
      tenantId: "e",
      key: "k1",
      workflow: "tomb_charge",
      outcome: "succeeded",
      completedAt: expect.any(Date),
      expiresAt: expired?.expiresAt,
      expired: true,
      tombstoneUntil: expired?.status === "completed" ? expired.tombstoneUntil : null,
    });
    await endTombstone("e", "k1");
    expect(await engine.inspect("e", "k1")).toBeNull();
  });
});

describe("a signal for a tombstoned run is acknowledged and changes nothing", () => {
  const waits = () =>
    workflow("tomb_wait")
      .input(z.object({ order: z.string() }))
      .waitFor("confirmed", { schema: z.object({ ok: z.boolean() }) })
      .respond(({ state }) => ({ status: 200, body: { confirmed: state.confirmed } }));

  it("the same signal again and a new one, before the sweep and after it; 404 once the tombstone is gone", async () => {
    const engine = createEngine({ db: t.db });
    const wf = waits();
    for (const key of ["unswept", "swept"]) {
      expect((await engine.runOnce(wf, { tenantId: "f", key, input: { order: key } })).status).toBe(202);
      expect(await engine.signal("f", key, "confirmed", { ok: true })).toEqual({ duplicate: false, woke: true });
      expect((await engine.runOnce(wf, { tenantId: "f", key, input: { order: key } })).status).toBe(200);
      // Within retention a repeat is a duplicate, as before.
      expect(await engine.signal("f", key, "confirmed", { ok: true })).toEqual({ duplicate: true, woke: false });
    }
    await expire("f", "swept");
    await engine.sweep();
    await expire("f", "unswept");
    expect(await rows("f", "swept")).toMatchObject({ runs: 0, tombstones: 1 });
    expect(await rows("f", "unswept")).toMatchObject({ runs: 1, tombstones: 0 });
    const acknowledged = { duplicate: false, woke: false, expired: true };
    for (const key of ["unswept", "swept"]) {
      expect(await engine.signal("f", key, "confirmed", { ok: true })).toEqual(acknowledged);
      // A payload never delivered: the tombstone keeps no signals, and the run ended; nothing is stored.
      expect(await engine.signal("f", key, "confirmed", { ok: false })).toEqual(acknowledged);
    }
    const { rows: stored } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = 'f' AND key = 'unswept'`.execute(t.db);
    expect(stored[0]?.n).toBe(1);
    for (const key of ["unswept", "swept"]) {
      await endTombstone("f", key);
      await expect(engine.signal("f", key, "confirmed", { ok: true })).rejects.toBeInstanceOf(RunNotFoundError);
    }
  });
});

describe("the sweeper", () => {
  it("moves expired records into tombstones and deletes tombstones past their time, in bounded batches", async () => {
    const wf = charges({ runs: 0 });
    const engine = createEngine({ db: t.db });
    for (let i = 0; i < 50; i++) await engine.runOnce(wf, { tenantId: "h", key: `k${i}`, input: { cents: i } });
    // The oldest expiries of the database, so each batch takes these first: k0-k24 expired a year ago
    // with a tombstone that lasts, k25-k49 swept once already, their tombstones a year past their time.
    await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - interval '1 year',
                tombstone_ms = 2 * 365 * 86400000::bigint
              WHERE tenant_id = 'h'`.execute(t.db);
    await sql`UPDATE idempo.runs SET tombstone_ms = 86400000
              WHERE tenant_id = 'h' AND substr(key, 2)::int >= 25`.execute(t.db);
    await sql`INSERT INTO idempo.tombstones (completed_at, expired_at, kept_until, tenant_id, key_digest, workflow, outcome,
                                             fingerprint)
              SELECT completed_at, expires_at, expires_at + interval '1 day', tenant_id, idempo.key_digest(key), workflow, outcome,
                     decode(fingerprint, 'hex')
              FROM idempo.runs WHERE tenant_id = 'h' AND substr(key, 2)::int >= 25`.execute(t.db);
    await sql`DELETE FROM idempo.runs WHERE tenant_id = 'h' AND substr(key, 2)::int >= 25`.execute(t.db);
    const counts = async () => {
      const { rows: found } = await sql<{ runs: number; live: number; past: number }>`
        SELECT (SELECT count(*)::int FROM idempo.runs WHERE tenant_id = 'h') AS runs,
               (SELECT count(*)::int FROM idempo.tombstones WHERE tenant_id = 'h' AND kept_until > now()) AS live,
               (SELECT count(*)::int FROM idempo.tombstones WHERE tenant_id = 'h' AND kept_until <= now()) AS past`.execute(
        t.db,
      );
      return found[0];
    };
    expect(await counts()).toEqual({ runs: 25, live: 0, past: 25 });
    expect(await engine.sweep({ batchSize: 10, maxBatches: 2 })).toBe(20);
    expect(await counts()).toEqual({ runs: 5, live: 20, past: 5 });
    await engine.sweep({ batchSize: 10 });
    expect(await counts()).toEqual({ runs: 0, live: 25, past: 0 });
    // Each tombstone refuses its key.
    await expect(engine.runOnce(wf, { tenantId: "h", key: "k3", input: { cents: 3 } })).rejects.toBeInstanceOf(
      IdempotencyKeyExpiredError,
    );
  });
});

describe("requests racing the moment of expiry", () => {
  it("never run the workflow twice within the tombstone window, with the sweeper running meanwhile", async () => {
    const counter = { runs: 0 };
    const wf = charges(counter, { retentionMs: 1_000 });
    const engines = Array.from({ length: 6 }, () => createEngine({ db: t.db }));
    const keys = ["r1", "r2", "r3"];
    for (const key of keys) await engines[0]?.runOnce(wf, { tenantId: "g", key, input: { cents: 7 } });
    const answers = { replayed: 0, expired: 0 };
    let sweeping = true;
    const sweeper = (async () => {
      while (sweeping) {
        await engines[0]?.sweep({ batchSize: 1 });
        await sleep(5);
      }
    })();
    // Waves of parallel retries, on many connections, from before the expiry
    // until three waves in a row found every key expired (at most 400 waves).
    for (let wave = 0, allExpired = 0; wave < 400 && allExpired < 3; wave++) {
      let expiredNow = 0;
      const results = await Promise.allSettled(
        engines.flatMap((e) => keys.map((key) => e.runOnce(wf, { tenantId: "g", key, input: { cents: 7 } }))),
      );
      for (const r of results) {
        if (r.status === "fulfilled") {
          expect(r.value.replayed).toBe(true);
          answers.replayed++;
        } else {
          expect(r.reason).toBeInstanceOf(IdempotencyKeyExpiredError);
          answers.expired++;
          expiredNow++;
        }
      }
      allExpired = expiredNow === results.length ? allExpired + 1 : 0;
      await sleep(20);
    }
    sweeping = false;
    await sweeper;
    expect(counter.runs).toBe(keys.length);
    expect(answers.expired).toBeGreaterThanOrEqual(3 * engines.length * keys.length);
    for (const key of keys) expect(await rows("g", key)).toEqual({ runs: 0, tombstones: 1, orders: 1 });
  });
});
