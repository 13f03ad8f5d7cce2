/**
 * Poison runs and operator verbs racing live owners, in a database of its
 * own: clients retry a fixed set of checkouts (and a few poison runs that
 * can never finish) while an operator loop releases, cancels, retries from
 * `charge` and tries unforced deletes of live runs. Whatever the
 * interleaving, no effect may happen twice, every intent must end with an
 * answer a client got (completed, canceled, or parked with its reason, as
 * its stored record says), and a delete under a live owner is refused.
 * Bounded by the number of intents and operator actions, never by time.
 */
import type { Engine } from "@idempo/core";
import { createEngine, RunParkedError, RunStateError, workflow } from "@idempo/core";
import { setFaultHook } from "@idempo/core/internal";
import type pg from "pg";
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import { installSchema, kyselyOn, openPool } from "./database.ts";
import { FakeProvider } from "./provider.ts";
import type { Random } from "./random.ts";
import { checkoutWorkflow } from "./workflows/checkout.ts";
import { logEffect } from "./workflows/effects.ts";

export interface OperatorScenarioOptions {
  /** Maintenance URL of the server; the scenario creates (and afterwards drops) its own database there. */
  readonly serverUrl: string;
  /** Checkouts that can finish. */
  readonly good: number;
  /** Runs whose step always throws, so they park after `maxAttempts` (3). */
  readonly poison: number;
  /** Operator actions at least, however fast the clients are. */
  readonly actions: number;
  /** Lease of every run, in ms; short, so verbs meet live owners and stuck runs alike. */
  readonly leaseMs: number;
  readonly rng: Random;
  /** Keep the database afterwards even when every check passed. */
  readonly keepDatabase?: boolean | undefined;
  readonly log: (line: string) => void;
}

/** What the operator verbs did, and what the check found. Part of the torture report. */
export interface OperatorVerdict {
  readonly intents: number;
  readonly released: number;
  readonly canceled: number;
  readonly retriedFrom: number;
  /** Unforced deletes of a run with a live owner, refused with RunStateError. */
  readonly refusedDeletes: number;
  /** Unforced deletes that went through because the lease ended between the look and the delete (documented); not checked further. */
  readonly forgotten: number;
  /** Poison runs that ended parked (or parked, then canceled). */
  readonly parked: number;
  /** Phases committed, orders written or provider operations made more than once. Must be 0. */
  readonly duplicateEffects: number;
  /** Intents without an answer, or whose stored record disagrees with the answer a client got. Must be 0. */
  readonly lostIntents: number;
  /** A poison run that did not end parked, or a scenario in which no verb took effect. Must be 0. */
  readonly otherViolations: number;
  readonly problems: readonly string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TENANT = "ops";

/** Run the scenario once; see the file comment. */
export async function runOperatorScenario(options: OperatorScenarioOptions): Promise<OperatorVerdict> {
  const name = uniqueName("idempo_ops");
  const url = await createDatabase(options.serverUrl, name);
  await installSchema(url);
  const pool = openPool(url, "idempo-torture-ops", 12);
  let verdict: OperatorVerdict | undefined;
  try {
    verdict = await scenario(pool, options);
    return verdict;
  } finally {
    await pool.end();
    const clean =
      verdict !== undefined && verdict.duplicateEffects + verdict.lostIntents + verdict.otherViolations === 0;
    if (clean && !options.keepDatabase) await dropDatabase(options.serverUrl, name);
    else options.log(`operator scenario: kept database ${name} for inspection`);
  }
}

async function scenario(pool: pg.Pool, options: OperatorScenarioOptions): Promise<OperatorVerdict> {
  const { rng } = options;
  const engine: Engine = createEngine({ db: kyselyOn(pool), leaseMs: options.leaseMs });
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
  // Widen every race: each boundary waits a little, so operators meet live owners mid-run,
  // and runs linger after their charge, where a rewind to `charge` is allowed.
  setFaultHook(engine, async (point) => {
    await sleep(rng.between(0, point === "after:step:charge" ? 200 : 30));
  });

  const keys = [
    ...Array.from({ length: options.good }, (_, i) => `g${i}`),
    ...Array.from({ length: options.poison }, (_, i) => `p${i}`),
  ];
  const answers = new Map<string, string>();
  let stop = false;
  const client = async (key: string) => {
    for (let i = 0; i < 400; i++) {
      try {
        const res = key.startsWith("p")
          ? await engine.runOnce(poison, { tenantId: TENANT, key, input: {} })
          : await engine.runOnce(checkout, {
              tenantId: TENANT,
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
    for (let ops = 0; !stop || ops < options.actions; ops++) {
      // Aim at runs still in flight (live or stuck): that is where a verb races an owner.
      const open = (await engine.listKeys({ tenantId: TENANT, status: "in_flight", limit: 100 })).items;
      const any = rng.pick(open.map((r) => r.key)) ?? (rng.pick(keys) as string);
      const roll = rng.next();
      try {
        if (roll < 0.35) {
          await engine.release(TENANT, any);
          tally.released++;
        } else if (roll < 0.5) {
          // Poison runs are left to park on their own; every other run may be canceled.
          const key = rng.pick(open.filter((r) => !r.key.startsWith("p")).map((r) => r.key));
          if (key === undefined) continue;
          await engine.cancel(TENANT, key);
          tally.canceled++;
        } else if (roll < 0.75) {
          // An operator who wants the charge made again: take the run from its owner, then rewind it,
          // racing the client's next takeover.
          const key = rng.pick(open.filter((r) => r.recoveryPoint === "charge").map((r) => r.key)) ?? any;
          await engine.release(TENANT, key);
          tally.released++;
          await engine.retryFrom(TENANT, key, "charge");
          tally.retriedFrom++;
        } else {
          const rec = await engine.inspect(TENANT, any);
          if (rec?.status === "in_flight" && (rec.leaseRemainingMs ?? 0) > 0 && rec.ownerToken !== null) {
            await engine.forget(TENANT, any);
            // The lease ended between the look and the delete: the run may start over (documented).
            tally.forgotten.add(any);
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
    if ((await engine.inspect(TENANT, key))?.status === "in_flight") await client(key);
  }

  const problems: string[] = [];
  let lostIntents = 0;
  let otherViolations = 0;
  let parked = 0;
  // Lost intents: every key ended with an answer, and the record agrees with it.
  for (const key of keys) {
    if (tally.forgotten.has(key)) continue;
    const answer = answers.get(key);
    const rec = await engine.inspect(TENANT, key);
    if (answer === undefined || rec === null) {
      lostIntents++;
      problems.push(`operator scenario ${key}: no answer (${answer}) or no record`);
      continue;
    }
    const stored = rec.status === "parked" ? "parked" : `${rec.response?.outcome} ${rec.response?.status}`;
    // A parked run an operator canceled afterwards has a stored answer too.
    const canceledAfterParking = answer === "parked" && rec.response?.outcome === "canceled";
    if (stored !== answer && !canceledAfterParking) {
      lostIntents++;
      problems.push(`operator scenario ${key}: client got ${answer}, record says ${stored}`);
    }
    if (key.startsWith("p")) {
      if (rec.status === "parked" || canceledAfterParking) parked++;
      else {
        otherViolations++;
        problems.push(`operator scenario ${key}: poison run ended ${stored}, not parked`);
      }
    }
  }
  // Duplicate effects: each phase of each intent committed at most once; one order per cart;
  // one provider operation per intent and step.
  let duplicateEffects = 0;
  const counted = async (text: string, what: (row: { k: string; n: number }) => string) => {
    const { rows } = await pool.query<{ k: string; n: number }>(text);
    for (const r of rows) {
      if (tally.forgotten.has(r.k.split(" ")[0] as string)) continue;
      duplicateEffects += r.n - 1;
      problems.push(`operator scenario ${what(r)}`);
    }
  };
  await counted(
    "SELECT key || ' ' || phase AS k, count(*)::int AS n FROM shop.effects GROUP BY key, phase HAVING count(*) > 1",
    (r) => `${r.k} committed ${r.n} times`,
  );
  await counted(
    "SELECT substr(cart_id, 6) AS k, count(*)::int AS n FROM shop.orders GROUP BY cart_id HAVING count(*) > 1",
    (r) => `${r.k}: ${r.n} orders`,
  );
  await counted(
    `SELECT intent_key || ' ' || step AS k, count(*)::int AS n FROM provider.operations
     GROUP BY intent_key, step HAVING count(*) > 1`,
    (r) => `${r.k}: ${r.n} provider operations`,
  );
  const actions = tally.released + tally.canceled + tally.retriedFrom + tally.refusedDeletes;
  if (actions === 0) {
    otherViolations++;
    problems.push("operator scenario: no operator verb took effect");
  }
  return {
    intents: keys.length,
    released: tally.released,
    canceled: tally.canceled,
    retriedFrom: tally.retriedFrom,
    refusedDeletes: tally.refusedDeletes,
    forgotten: tally.forgotten.size,
    parked,
    duplicateEffects,
    lostIntents,
    otherViolations,
    problems,
  };
}
