import type { Engine } from "@idempo/core";
import { createEngine, RunParkedError, RunStateError, workflow } from "@idempo/core";
import { setFaultHook } from "@idempo/core/internal";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import { installSchema, kyselyOn, openPool } from "../src/database.ts";
import { FakeProvider } from "../src/provider.ts";
import { checkoutWorkflow } from "../src/workflows/checkout.ts";
import { logEffect } from "../src/workflows/effects.ts";

/**
 * Poison runs and operator verbs racing live owners: clients retry a fixed
 * set of checkouts (and a few poison runs that can never finish) while an
 * operator loop releases, cancels, retries from `charge` and tries
 * unforced deletes at random. Whatever the interleaving: no effect happens
 * twice, every intent ends with an answer a client got (completed,
 * canceled, or parked with its reason), and a delete under a live owner is
 * refused. Bounded by the number of intents, not by time.
 */
const serverUrl = inject("serverUrl");
const name = uniqueName("idempo_verbs");
let pool: pg.Pool;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  const url = await createDatabase(serverUrl, name);
  await installSchema(url);
  pool = openPool(url, "idempo-verbs-test", 12);
});
afterAll(async () => {
  await pool.end();
  await dropDatabase(serverUrl, name);
});

const GOOD = 30;
const POISON = 4;

describe("operator verbs racing live owners", () => {
  it("no duplicate effect, no lost intent, and unforced deletes of live runs are refused", async () => {
    const db = kyselyOn(pool);
    const engine: Engine = createEngine({ db, leaseMs: 400 });
    const checkout = checkoutWorkflow(new FakeProvider(pool));
    const poison = workflow("poison", { maxAttempts: 3 })
      .phase("create_order", async ({ tx, ...run }) => {
        await logEffect(tx, run, "poison", "create_order");
        return {};
      })
      .step("charge", () => {
        throw new Error("the provider refuses this card forever");
      })
      .respond(() => ({ status: 201, body: null }));
    // Widen every race: each boundary waits a little, so operators meet live owners mid-run.
    setFaultHook(engine, async () => {
      await sleep(Math.random() * 30);
    });

    const keys = [
      ...Array.from({ length: GOOD }, (_, i) => `g${i}`),
      ...Array.from({ length: POISON }, (_, i) => `p${i}`),
    ];
    const answers = new Map<string, string>();
    let stop = false;
    const client = async (key: string) => {
      for (let i = 0; i < 400; i++) {
        try {
          const res = key.startsWith("p")
            ? await engine.runOnce(poison, { tenantId: "t1", key, input: {} })
            : await engine.runOnce(checkout, {
                tenantId: "t1",
                key,
                input: { cartId: `cart-${key}`, amountCents: 100 + Number(key.slice(1)) },
              });
          answers.set(key, `${res.outcome} ${res.status}`);
          return;
        } catch (error) {
          if (error instanceof RunParkedError) {
            answers.set(key, "parked");
            return;
          }
          await sleep(20);
        }
      }
    };
    const tally = { released: 0, canceled: 0, retriedFrom: 0, refusedDeletes: 0, forgotten: new Set<string>() };
    const operator = async () => {
      // A fixed amount of operator work, however fast the clients are.
      for (let ops = 0; !stop || ops < 150; ops++) {
        // Aim at runs still in flight (live or stuck): that is where a verb races an owner.
        const open = (await engine.listKeys({ tenantId: "t1", status: "in_flight", limit: 100 })).items;
        const pick = open.length > 0 ? open : keys.map((k) => ({ key: k }));
        const key = (pick[Math.floor(Math.random() * pick.length)] as { key: string }).key;
        const roll = Math.random();
        try {
          if (roll < 0.4) {
            await engine.release("t1", key);
            tally.released++;
          } else if (roll < 0.5) {
            // Poison runs are left to park on their own; every other run may be canceled.
            if (key.startsWith("p")) continue;
            await engine.cancel("t1", key);
            tally.canceled++;
          } else if (roll < 0.75) {
            await engine.retryFrom("t1", key, "charge");
            tally.retriedFrom++;
          } else {
            const rec = await engine.inspect("t1", key);
            if (rec?.status === "in_flight" && (rec.leaseRemainingMs ?? 0) > 0 && rec.ownerToken !== null) {
              await engine.forget("t1", key);
              // The lease ended between the look and the delete: the run may start over (documented).
              tally.forgotten.add(key);
            }
          }
        } catch (error) {
          if (error instanceof RunStateError) {
            if (roll >= 0.75) tally.refusedDeletes++;
          } else if (!(error as { code?: string }).code) {
            throw error;
          }
        }
        await sleep(10);
      }
    };
    const op = operator();
    await Promise.all(keys.map(client));
    stop = true;
    await op;
    setFaultHook(engine, undefined);
    // An operator's unpark by retryFrom, or a release, can leave a run takeable after its client
    // stopped: the client's next retry finishes it, as a real client's would.
    for (const key of keys) {
      if ((await engine.inspect("t1", key))?.status === "in_flight") await client(key);
    }

    // Lost intents: every key ended with an answer, and the record agrees with it.
    const problems: string[] = [];
    for (const key of keys) {
      const answer = answers.get(key);
      const rec = await engine.inspect("t1", key);
      if (tally.forgotten.has(key)) continue;
      if (answer === undefined || rec === null) {
        problems.push(`${key}: no answer (${answer}) or no record`);
        continue;
      }
      const stored = rec.status === "parked" ? "parked" : `${rec.response?.outcome} ${rec.response?.status}`;
      // A parked run an operator canceled afterwards has a stored answer too.
      if (stored !== answer && !(answer === "parked" && rec.response?.outcome === "canceled"))
        problems.push(`${key}: client got ${answer}, record says ${stored}`);
    }
    // Duplicate effects: each phase of each intent committed at most once; one provider operation per step key.
    const { rows } = await pool.query<{ key: string; phase: string; n: number }>(
      "SELECT key, phase, count(*)::int AS n FROM shop.effects GROUP BY key, phase HAVING count(*) > 1",
    );
    for (const r of rows) if (!tally.forgotten.has(r.key)) problems.push(`${r.key}: ${r.phase} committed ${r.n} times`);
    const orders = await pool.query<{ cart_id: string; n: number }>(
      "SELECT cart_id, count(*)::int AS n FROM shop.orders GROUP BY cart_id HAVING count(*) > 1",
    );
    for (const r of orders.rows) problems.push(`${r.cart_id}: ${r.n} orders`);
    console.log(
      `verbs: released ${tally.released}, canceled ${tally.canceled}, retried from ${tally.retriedFrom}, ` +
        `unforced deletes refused ${tally.refusedDeletes}, forgotten ${tally.forgotten.size}`,
    );
    expect(problems).toEqual([]);
    // The chaos really happened.
    expect(tally.released + tally.canceled + tally.retriedFrom + tally.refusedDeletes).toBeGreaterThan(0);
    for (const key of keys.filter((k) => k.startsWith("p") && !tally.forgotten.has(k))) {
      expect((await engine.inspect("t1", key))?.status, key).toBe("parked");
    }
  }, 180_000);
});
