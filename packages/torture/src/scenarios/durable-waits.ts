/**
 * The durable scenario: runs that sleep, enqueue an outbox message and
 * wait for signals while the worker processes executing them (and relaying
 * their messages to a webhook receiver) are SIGKILLed and restarted, and
 * while the provider's confirmation webhook is delivered several times,
 * from several connections at once, before, during and after the run
 * reaches its wait. Intents are enqueued inside the driver's own
 * transactions (some of which roll back), clients retry some keys
 * meanwhile, so their `runOnce` races the workers for due runs, and an
 * operator rewinds some waiting runs to the phase that sent their message
 * (`retryFrom`, some with `resendOutbox`). Afterwards, runs of a workflow
 * with a one-second retention are completed, expired and swept while their
 * keys are retried and their signals repeated.
 *
 * Then everything is checked against the ledger in PostgreSQL and the
 * receiver's record of delivery keys: no effect twice, no intent lost
 * (each completed with its capture, each message received), no rolled-back
 * enqueue present, every signal stored and merged into state exactly once
 * with the payload that was sent, and no retry after retention run again.
 * Bounded by counts (intents, deliveries, kills, rewinds); the only clock
 * is a generous timeout for the runs to finish once the chaos is over.
 */
import type { Engine } from "@idempo/core";
import { createEngine, IdempotencyKeyInProgressError } from "@idempo/core";
import type { RawBuilder } from "kysely";
import { sql } from "kysely";
import type pg from "pg";
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";
import type { Db } from "../database.ts";
import { installSchema, kyselyOn, openPool } from "../database.ts";
import { Random } from "../random.ts";
import { briefConfirmationWorkflow, confirmationV2Workflow, confirmationWorkflow } from "../workflows/confirmation.ts";
import { logEffect } from "../workflows/effects.ts";
import type { Intent } from "./durable-context.ts";
import { Findings, sleep } from "./durable-context.ts";
import type { DurableOptions, DurableReport } from "./durable-report.ts";
import { durablePassed } from "./durable-report.ts";
import { retainedIntents, runRetention } from "./durable-retention.ts";
import type { RetryFromTally } from "./durable-retry-from.ts";
import { rewindOnce } from "./durable-retry-from.ts";
import { signalSenders } from "./durable-signals.ts";
import { judgeIntents } from "./durable-verdict.ts";
import { DurableFleet } from "./durable-workers.ts";
import { startOutboxReceiver } from "./outbox-receiver.ts";

/** The longest the runs may take to finish once the chaos is over: generous, only a hang reaches it. */
const FINISH_TIMEOUT_MS = 300_000;
const SIGNAL_CONNECTIONS = 3;

/** Wait until `pending` counts nothing (polled), or the deadline passes; false then. */
async function drained(db: Db, pending: RawBuilder<{ n: number }>, deadline: number): Promise<boolean> {
  for (;;) {
    const { rows } = await pending.execute(db);
    if ((rows[0]?.n ?? 0) === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(250);
  }
}

/** Run the scenario on a fresh database; the database is dropped afterwards unless a check failed. */
export async function runDurable(options: DurableOptions): Promise<DurableReport> {
  const started = Date.now();
  const rnd = new Random(options.seed);
  const name = uniqueName("idempo_durable");
  const url = await createDatabase(options.serverUrl, name);
  await installSchema(url);
  options.log(
    `durable: database ${name}; ${options.workers} workers, ${options.intents} intents, seed ${options.seed}`,
  );
  const receiver = await startOutboxReceiver(new Random(options.seed + 1));
  const pool = openPool(url, "idempo-durable-driver", 8);
  const signalPools: pg.Pool[] = Array.from({ length: SIGNAL_CONNECTIONS }, (_, i) =>
    openPool(url, `idempo-durable-signal-${i}`, 4),
  );
  const db = kyselyOn(pool);
  const known = [confirmationWorkflow, briefConfirmationWorkflow];
  const engine = createEngine({ db, leaseMs: options.leaseMs, workflows: known });
  const signalEngines: Engine[] = signalPools.map((p) => createEngine({ db: kyselyOn(p), workflows: known }));
  // A process that knows only another version of the workflow than the one the runs started under.
  const foreignEngine = createEngine({ db: kyselyOn(signalPools[0] as pg.Pool), workflows: [confirmationV2Workflow] });
  const findings = new Findings();
  const fleet = new DurableFleet(url, options.leaseMs, receiver);
  let clean = false;

  try {
    await Promise.all(Array.from({ length: options.workers }, () => fleet.start()));

    const intents: Intent[] = Array.from({ length: options.intents }, (_, i) => ({
      tenantId: `t${i % 3}`,
      key: `pay-${i}`,
      input: { intent: `i${i}`, sleepMs: Math.floor(rnd.between(0, options.maxSleepMs)) },
      payload: { intent: `i${i}`, nonce: `n${i}-${rnd.below(1_000_000)}` },
    }));
    const retained = retainedIntents(options.retained, rnd);
    const created = new Map<string, number>();
    const enqueueIn = async (tx: Db, it: Intent) => {
      const res = await engine.enqueue(tx, confirmationWorkflow, {
        tenantId: it.tenantId,
        key: it.key,
        input: it.input,
      });
      if (res.created) created.set(it.key, (created.get(it.key) ?? 0) + 1);
      return res;
    };
    // Each intent's order and its run in one transaction of the driver's own; every third is enqueued twice.
    await Promise.all(
      intents.map(async (it, i) => {
        await db.transaction().execute(async (tx) => {
          const res = await enqueueIn(tx, it);
          if (res.created) await logEffect(tx, { ...it, attempt: 0 }, "confirmation", "order_placed");
        });
        if (i % 3 === 0) await db.transaction().execute((tx) => enqueueIn(tx, it));
      }),
    );
    const rolledBack = Array.from({ length: options.rolledBack }, (_, i) => ({
      tenantId: "t0",
      key: `rolled-back-${i}`,
      input: { intent: `r${i}`, sleepMs: 0 },
    }));
    for (const r of rolledBack) {
      await db
        .transaction()
        .execute(async (tx) => {
          await engine.enqueue(tx, confirmationWorkflow, r);
          throw new Error("the caller's transaction fails after the enqueue");
        })
        .catch(() => undefined);
    }

    // Chaos and deliveries at once: signals from racing connections, kills, client retries, rewinds.
    const senders = signalSenders({
      engines: signalEngines,
      foreign: foreignEngine,
      rnd,
      maxSleepMs: options.maxSleepMs,
      findings,
    });
    const signals = senders.tally;
    const answers = { accepted: 0, inProgress: 0, completed: 0 };
    const deadline = Date.now() + FINISH_TIMEOUT_MS;
    const retries: RetryFromTally = { rewound: new Map(), resent: new Set(), plain: 0, resend: 0 };
    // The operator rewinds these while they wait; their confirmations are held back until it is done.
    const rewinds = new Map(
      intents
        .filter((_, i) => i % 4 === 1)
        .slice(0, options.retries)
        .map((it, j) => [it.key, rewindOnce(engine, it, j % 2 === 1, { rnd, tally: retries, findings, deadline })]),
    );
    const deliveries = intents.flatMap((it) =>
      Array.from({ length: options.deliveries }, () => ({ it, at: rnd.between(0, options.maxSleepMs * 2) })),
    );
    const conflicted = intents.slice(0, options.conflicts);
    const unusableDone = Promise.all([
      ...intents.slice(intents.length - options.invalidSignals).map((it) => senders.sendUnusable(it, false)),
      ...intents.slice(0, options.foreignSignals).map((it) => senders.sendUnusable(it, true)),
    ]);
    const deliveriesDone = Promise.all(
      deliveries.map(async ({ it, at }) => {
        await rewinds.get(it.key);
        await sleep(at);
        await senders.deliver(it, it.payload, false);
      }),
    ).then(async () => {
      // After the first delivery is in: another payload under the same name must be refused.
      await Promise.all(conflicted.map((it) => senders.deliver(it, { ...it.payload, nonce: "forged" }, true)));
    });
    const clientsDone = Promise.all(
      intents
        .filter((_, i) => i % 2 === 0)
        .map(async (it) => {
          await sleep(rnd.between(0, options.maxSleepMs * 2));
          try {
            const res = await engine.runOnce(confirmationWorkflow, {
              tenantId: it.tenantId,
              key: it.key,
              input: it.input,
            });
            if (res.outcome === "suspended") answers.accepted++;
            else if (res.status === 201) answers.completed++;
            else findings.violation(`${it.tenantId}/${it.key}: a client got ${res.status} ${res.outcome}`);
          } catch (error) {
            if (error instanceof IdempotencyKeyInProgressError) answers.inProgress++;
            else findings.violation(`${it.tenantId}/${it.key}: a client got ${String(error)}`);
          }
        }),
    );
    const killsDone = (async () => {
      for (let single = 0; single < options.kills; single++) {
        await sleep(rnd.between(50, Math.max(100, options.maxSleepMs / 2)));
        if (options.killAllOnce && single === Math.floor(options.kills / 2)) {
          options.log(`durable: killed all ${await fleet.killAll()} workers at once`);
        }
        await fleet.killOne((n) => rnd.below(n));
      }
    })();
    await Promise.all([deliveriesDone, unusableDone, clientsDone, killsDone, ...rewinds.values()]);

    // Every run finishes on the workers that are left (bounded by count; the timeout only catches a hang).
    const unfinished = sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.runs WHERE workflow = 'confirmation' AND status <> 'completed'
    `;
    if (!(await drained(db, unfinished, deadline))) options.log("durable: runs not completed after the chaos");

    // The verdict, from the ledger; then the retention stage, then the receiver's count by delivery key.
    const verdict = await judgeIntents(
      db,
      engine,
      intents,
      { created, accepted: signals.accepted, rewound: retries.rewound },
      findings,
    );
    for (const r of rolledBack) {
      if (await engine.inspect(r.tenantId, r.key)) {
        findings.violation(`${r.tenantId}/${r.key}: a rolled-back enqueue exists`);
      }
    }
    if (signals.conflictsRefused !== conflicted.length) {
      findings.violation(`${signals.conflictsRefused} of ${conflicted.length} conflicting confirmations refused`);
    }
    const retention = await runRetention(db, { driver: engine, signal: signalEngines[1] as Engine }, retained, {
      rnd,
      findings,
      deadline: Date.now() + FINISH_TIMEOUT_MS,
    });
    const pending = sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.outbox WHERE status = 'pending'`;
    if (!(await drained(db, pending, Date.now() + FINISH_TIMEOUT_MS))) options.log("durable: outbox not drained");
    const expected = new Map([
      ...intents.map((it) => [`${it.tenantId}/${it.input.intent}`, retries.resent.has(it.key) ? 2 : 1] as const),
      ...retained.map((it) => [`${it.tenantId}/${it.input.intent}`, 1] as const),
    ]);
    const outbox = receiver.verdict(expected);
    for (const p of outbox.problems) findings.note(p);
    if (outbox.intendedResends !== retries.resend) {
      findings.violation(`${outbox.intendedResends} intended resends arrived, ${retries.resend} asked for`);
    }
    const report: DurableReport = {
      intents: intents.length,
      kills: fleet.kills,
      signalsSent: signals.sent,
      duplicateSignals: signals.duplicates,
      wokeByDelivery: signals.woke,
      conflictsRefused: signals.conflictsRefused,
      unusableRefused: signals.unusableRefused,
      acknowledgedUnusable:
        signals.acknowledgedUnusable + verdict.acknowledgedUnusable + retention.acknowledgedUnusable,
      clientAnswers: answers,
      takeovers: verdict.takeovers,
      retriedFrom: { plain: retries.plain, resend: retries.resend },
      outbox: {
        messages: outbox.messages,
        deliveries: outbox.deliveries,
        redeliveries: outbox.redeliveries,
        intendedResends: outbox.intendedResends,
      },
      retention: {
        intents: retention.intents,
        replays: retention.replays,
        keyExpired: retention.keyExpired,
        signals: retention.signals,
        expiredSignals: retention.expiredSignals,
        reExecutions: retention.reExecutions,
      },
      duplicateEffects: verdict.duplicateEffects + outbox.duplicateEffects + retention.duplicateEffects,
      lostIntents: verdict.lostIntents + outbox.lost + retention.lostIntents,
      signalsNotOnce: verdict.signalsNotOnce,
      otherViolations: findings.other,
      problems: findings.problems,
      seconds: Math.round((Date.now() - started) / 1000),
    };
    clean = durablePassed(report);
    if (!clean) options.log(`durable: checks failed; database ${name} kept for inspection`);
    return report;
  } finally {
    await fleet.stop();
    await receiver.close();
    await Promise.all([pool.end(), ...signalPools.map((p) => p.end())]);
    if (clean) await dropDatabase(options.serverUrl, name);
  }
}
