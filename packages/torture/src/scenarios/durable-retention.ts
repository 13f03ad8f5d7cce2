/**
 * The retention stage of the durable scenario: payments of a workflow with
 * a one-second retention are enqueued, confirmed and completed by the
 * workers, whose sweepers then turn their records into tombstones. Until a
 * key's tombstone is in, and once after, its client retries `runOnce` and
 * its provider repeats the confirmation; after it, an `enqueue` of the same
 * request comes too. Each retry must be answered from the record (a
 * replay) while it is retained and refused with 410 `key_expired` after,
 * never run again; each repeated signal is acknowledged (a duplicate, or
 * `expired: true`) and changes nothing. A retry that started a run again is
 * a duplicate effect, and shows in the ledger and at the receiver too.
 */
import type { Engine } from "@idempo/core";
import { IdempotencyKeyExpiredError, IdempotencyKeyInProgressError } from "@idempo/core";
import { sql } from "kysely";
import type { Db } from "../database.ts";
import type { Random } from "../random.ts";
import { briefConfirmationWorkflow } from "../workflows/confirmation.ts";
import type { Findings, Intent } from "./durable-context.ts";
import { sleep } from "./durable-context.ts";

/** What the stage saw; problems go to the findings. */
export interface RetentionTally {
  intents: number;
  replays: number;
  keyExpired: number;
  expiredSignals: number;
  /** Signals sent: the first confirmation of each run and every repeat. */
  signals: number;
  reExecutions: number;
  duplicateEffects: number;
  lostIntents: number;
  acknowledgedUnusable: number;
}

const PHASES = ["authorise", "notify", "capture"];

/** The stage's intents (so the receiver knows whose messages to expect), before it runs. */
export function retainedIntents(count: number, rnd: Random): Intent[] {
  return Array.from({ length: count }, (_, i) => ({
    tenantId: `t${i % 3}`,
    key: `late-${i}`,
    input: { intent: `b${i}`, sleepMs: 0 },
    payload: { intent: `b${i}`, nonce: `m${i}-${rnd.below(1_000_000)}` },
  }));
}

/** Run the stage on the scenario's database while its workers run; see the file comment. */
export async function runRetention(
  db: Db,
  engines: { readonly driver: Engine; readonly signal: Engine },
  intents: readonly Intent[],
  deps: { readonly rnd: Random; readonly findings: Findings; readonly deadline: number },
): Promise<RetentionTally> {
  const { driver, signal } = engines;
  const { rnd, findings, deadline } = deps;
  const t: RetentionTally = {
    intents: intents.length,
    replays: 0,
    keyExpired: 0,
    expiredSignals: 0,
    signals: 0,
    reExecutions: 0,
    duplicateEffects: 0,
    lostIntents: 0,
    acknowledgedUnusable: 0,
  };
  const request = (it: Intent) => ({ tenantId: it.tenantId, key: it.key, input: it.input });
  const again = (it: Intent, what: string) => {
    t.reExecutions++;
    t.duplicateEffects++;
    findings.note(`${it.tenantId}/${it.key}: a retry after completion ${what}`);
  };
  const retry = async (it: Intent, swept: boolean) => {
    try {
      const res = await driver.runOnce(briefConfirmationWorkflow, request(it));
      if (res.replayed && res.status === 201 && !swept) t.replays++;
      else again(it, `was answered ${res.status} ${res.outcome} (replayed ${res.replayed})`);
    } catch (error) {
      if (error instanceof IdempotencyKeyExpiredError) t.keyExpired++;
      else if (error instanceof IdempotencyKeyInProgressError) again(it, "found the key in flight");
      else findings.violation(`${it.tenantId}/${it.key}: a retry after completion raised ${String(error)}`);
    }
  };
  const repeatSignal = async (it: Intent, swept: boolean) => {
    t.signals++;
    try {
      const res = await signal.signal(it.tenantId, it.key, "confirmed", it.payload);
      if (res.expired) t.expiredSignals++;
      else if (!res.duplicate || swept) {
        t.acknowledgedUnusable++;
        findings.note(
          `${it.tenantId}/${it.key}: a repeated confirmation was answered duplicate ${res.duplicate} after the sweep ${swept}`,
        );
      }
    } catch (error) {
      findings.violation(`${it.tenantId}/${it.key}: a repeated confirmation raised ${String(error)}`);
    }
  };

  for (const it of intents) {
    await db.transaction().execute(async (tx) => {
      const res = await driver.enqueue(tx, briefConfirmationWorkflow, request(it));
      if (!res.created) findings.violation(`${it.tenantId}/${it.key}: the first enqueue created nothing`);
    });
  }
  await Promise.all(
    intents.map(async (it) => {
      t.signals++;
      await signal.signal(it.tenantId, it.key, "confirmed", it.payload);
      // Wait for the run to complete, then retry until the sweeper has replaced the record by its tombstone.
      let status = (await driver.inspect(it.tenantId, it.key))?.status;
      while (status !== "completed" && status !== "expired") {
        if (Date.now() > deadline) {
          t.lostIntents++;
          findings.note(`${it.tenantId}/${it.key}: the retained run did not complete (status ${status})`);
          return;
        }
        await sleep(100);
        status = (await driver.inspect(it.tenantId, it.key))?.status;
      }
      let swept = false;
      while (!swept) {
        if (Date.now() > deadline) {
          findings.violation(`${it.tenantId}/${it.key}: the sweeper never turned the record into a tombstone`);
          return;
        }
        swept = (await driver.inspect(it.tenantId, it.key))?.status === "expired";
        await retry(it, swept);
        await repeatSignal(it, swept);
        if (!swept) await sleep(rnd.between(50, 300));
      }
      await db.transaction().execute(async (tx) => {
        try {
          const res = await driver.enqueue(tx, briefConfirmationWorkflow, request(it));
          if (res.created) again(it, "was enqueued again");
          else findings.violation(`${it.tenantId}/${it.key}: an enqueue after the tombstone found a record`);
        } catch (error) {
          if (error instanceof IdempotencyKeyExpiredError) t.keyExpired++;
          else throw error;
        }
      });
    }),
  );

  // The ledger: each phase committed once per key, one capture, whatever the retries did.
  const { rows } = await sql<{ key: string; phase: string; n: number }>`
    SELECT key, phase, count(*)::int AS n FROM shop.effects WHERE workflow = 'confirmation_brief' GROUP BY key, phase
    UNION ALL
    SELECT key, 'captures', count(*)::int FROM shop.captures WHERE key LIKE 'late-%' GROUP BY key
  `.execute(db);
  for (const it of intents) {
    for (const phase of [...PHASES, "captures"]) {
      const n = rows.find((r) => r.key === it.key && r.phase === phase)?.n ?? 0;
      if (n > 1) {
        t.duplicateEffects += n - 1;
        findings.note(`${it.tenantId}/${it.key}: ${phase} committed ${n} times after retention`);
      } else if (n === 0) {
        t.lostIntents++;
        findings.note(`${it.tenantId}/${it.key}: ${phase} never committed`);
      }
    }
  }
  return t;
}
