/**
 * The durable scenario: runs that sleep and wait for signals while the
 * worker processes executing them are SIGKILLed and restarted, and while
 * the provider's confirmation webhook is delivered several times, from
 * several connections at once, before, during and after the run reaches
 * its wait. Intents are enqueued inside the driver's own transactions
 * (some of which roll back), and clients retry some keys meanwhile, so
 * their `runOnce` races the workers for due runs.
 *
 * Then everything is checked against the ledger in PostgreSQL: no effect
 * twice, no intent lost (each completed with its capture), no rolled-back
 * enqueue present, and every signal stored and merged into state exactly
 * once, with the payload that was sent. Bounded by counts (intents,
 * deliveries, kills); the only clock is a generous timeout for the runs to
 * finish once the chaos is over.
 */
import type { ChildProcess } from "node:child_process";
import type { Engine } from "@idempo/core";
import {
  createEngine,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  RunStateError,
} from "@idempo/core";
import { sql } from "kysely";
import type pg from "pg";
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";
import type { Db } from "../database.ts";
import { installSchema, kyselyOn, openPool } from "../database.ts";
import { Random } from "../random.ts";
import { confirmationV2Workflow, confirmationWorkflow } from "../workflows/confirmation.ts";
import { logEffect } from "../workflows/effects.ts";
import { exited, spawnWorker } from "./durable-workers.ts";

/** How big a durable run is; every number bounds work, none is a duration budget. */
export interface DurableOptions {
  /** Maintenance URL of the server; the scenario makes (and drops) its own database there. */
  readonly serverUrl: string;
  /** Intents enqueued (each one run). */
  readonly intents: number;
  /** Worker processes running `startWorker` at any time. */
  readonly workers: number;
  /** SIGKILLs of one worker process (each replaced at once by a fresh one). */
  readonly kills: number;
  /**
   * Halfway through the single kills, SIGKILL every worker at once and only
   * then start new ones: for a moment no process holds or knows any run.
   */
  readonly killAllOnce: boolean;
  /** Deliveries of each intent's confirmation (the same payload, from racing connections). */
  readonly deliveries: number;
  /** Intents that also get a confirmation with another payload: it must be refused. */
  readonly conflicts: number;
  /** Intents that also get a confirmation whose payload fails the wait's schema: it must be refused. */
  readonly invalidSignals: number;
  /**
   * Intents that also get their confirmation from a process that knows only
   * another version of the workflow: refused with nothing stored (or, after
   * the real one is in, answered as a repeat of it).
   */
  readonly foreignSignals: number;
  /** Enqueues in transactions that roll back: those runs must never exist. */
  readonly rolledBack: number;
  /** Lease of every run, in ms; short, so a killed worker's run is taken over soon. */
  readonly leaseMs: number;
  /** Longest sleep of a run, in ms (each sleeps a random time up to it). */
  readonly maxSleepMs: number;
  readonly seed: number;
  readonly log: (line: string) => void;
}

/** What the durable scenario found. */
export interface DurableReport {
  readonly intents: number;
  /** Worker processes SIGKILLed (and replaced), the ones killed all at once included. */
  readonly kills: number;
  /** `engine.signal` calls made, duplicates and conflicts included. */
  readonly signalsSent: number;
  /** Deliveries answered `duplicate: true` (the same signal again). */
  readonly duplicateSignals: number;
  /** Deliveries that found the run suspended on the wait and woke it. */
  readonly wokeByDelivery: number;
  /** Conflicting payloads refused with IdempotencyKeyMismatchError (must equal `conflicts`). */
  readonly conflictsRefused: number;
  /** Invalid-payload and other-version signals refused (the other-version repeats of a delivered confirmation count as duplicates instead). */
  readonly unusableRefused: number;
  /**
   * Signals whose call resolved as a new delivery but that the run never
   * used: an invalid or other-version signal acknowledged, or an accepted
   * confirmation whose payload is not what the run merged. Must be 0.
   */
  readonly acknowledgedUnusable: number;
  /** Client `runOnce` retries during the chaos, by answer. */
  readonly clientAnswers: { readonly accepted: number; readonly inProgress: number; readonly completed: number };
  /** Attempts after the first over all runs: takeovers of a killed worker's run. */
  readonly takeovers: number;
  /** Effects (enqueue, authorise, capture) beyond one per intent. Must be 0. */
  readonly duplicateEffects: number;
  /** Intents not completed with their capture, or with an effect missing. Must be 0. */
  readonly lostIntents: number;
  /** Intents whose signal was not stored, accepted and merged exactly once with the payload sent. Must be 0. */
  readonly signalsNotOnce: number;
  /** Anything else broken: a rolled-back enqueue that exists, a conflict accepted, an unexpected error. Must be 0. */
  readonly otherViolations: number;
  /** The first violations found. */
  readonly problems: readonly string[];
  readonly seconds: number;
}

/** True when nothing was duplicated, lost, or delivered other than exactly once. */
export function durablePassed(r: DurableReport): boolean {
  return (
    r.duplicateEffects === 0 &&
    r.lostIntents === 0 &&
    r.signalsNotOnce === 0 &&
    r.acknowledgedUnusable === 0 &&
    r.otherViolations === 0
  );
}

/** The one line the scenario prints. */
export function durableSummaryLine(r: DurableReport): string {
  return (
    `durable: intents ${r.intents}, worker kills ${r.kills}, takeovers ${r.takeovers}, signals sent ${r.signalsSent} ` +
    `(duplicates ${r.duplicateSignals}, conflicts refused ${r.conflictsRefused}, woke ${r.wokeByDelivery}), ` +
    `unusable refused ${r.unusableRefused}, duplicate effects ${r.duplicateEffects}, lost intents ${r.lostIntents}, ` +
    `signals not delivered once ${r.signalsNotOnce}, acknowledged-but-unusable ${r.acknowledgedUnusable} ` +
    `(other violations ${r.otherViolations}, ${r.seconds} s)`
  );
}

/** The longest the runs may take to finish once the chaos is over: generous, only a hang reaches it. */
const FINISH_TIMEOUT_MS = 300_000;
const SIGNAL_CONNECTIONS = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Intent {
  readonly tenantId: string;
  readonly key: string;
  readonly input: { intent: string; sleepMs: number };
  readonly payload: { intent: string; nonce: string };
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
  const pool = openPool(url, "idempo-durable-driver", 8);
  const signalPools: pg.Pool[] = Array.from({ length: SIGNAL_CONNECTIONS }, (_, i) =>
    openPool(url, `idempo-durable-signal-${i}`, 4),
  );
  const db = kyselyOn(pool);
  const engine = createEngine({ db, leaseMs: options.leaseMs });
  const signalEngines: Engine[] = signalPools.map((p) =>
    createEngine({ db: kyselyOn(p), workflows: [confirmationWorkflow] }),
  );
  // A process that knows only another version of the workflow than the one the runs started under.
  const foreignEngine = createEngine({ db: kyselyOn(signalPools[0] as pg.Pool), workflows: [confirmationV2Workflow] });
  const problems: string[] = [];
  let otherViolations = 0;
  const violation = (text: string) => {
    otherViolations++;
    problems.push(text);
  };
  const workers = new Set<ChildProcess>();
  let clean = false;
  const startWorker = async () => {
    const w = spawnWorker(url, options.leaseMs);
    workers.add(w.child);
    w.child.once("exit", () => workers.delete(w.child));
    await w.ready;
  };

  try {
    await Promise.all(Array.from({ length: options.workers }, () => startWorker()));

    const intents: Intent[] = Array.from({ length: options.intents }, (_, i) => ({
      tenantId: `t${i % 3}`,
      key: `pay-${i}`,
      input: { intent: `i${i}`, sleepMs: Math.floor(rnd.between(0, options.maxSleepMs)) },
      payload: { intent: `i${i}`, nonce: `n${i}-${rnd.below(1_000_000)}` },
    }));
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

    // Chaos and deliveries at once: signals from racing connections, kills, client retries.
    let signalsSent = 0;
    let duplicateSignals = 0;
    let woke = 0;
    let conflictsRefused = 0;
    const accepted = new Map<string, number>();
    const answers = { accepted: 0, inProgress: 0, completed: 0 };
    const deliver = async (it: Intent, payload: unknown, conflict: boolean) => {
      const via = signalEngines[rnd.below(signalEngines.length)] as Engine;
      signalsSent++;
      try {
        const res = await via.signal(it.tenantId, it.key, "confirmed", payload);
        if (conflict) violation(`${it.tenantId}/${it.key}: a conflicting confirmation was accepted`);
        else if (res.duplicate) duplicateSignals++;
        else accepted.set(it.key, (accepted.get(it.key) ?? 0) + 1);
        if (res.woke) woke++;
      } catch (error) {
        if (conflict && error instanceof IdempotencyKeyMismatchError) conflictsRefused++;
        else violation(`${it.tenantId}/${it.key}: signal raised ${String(error)}`);
      }
    };
    const deliveries = intents.flatMap((it) =>
      Array.from({ length: options.deliveries }, () => ({ it, at: rnd.between(0, options.maxSleepMs * 2) })),
    );
    const conflicted = intents.slice(0, options.conflicts);
    // Signals the run cannot use: each call must throw (nothing stored), or, for the other-version
    // process, answer as a repeat of the confirmation already delivered; a resolved new delivery is
    // acknowledged-but-unusable.
    let unusableRefused = 0;
    let acknowledgedUnusable = 0;
    const sendUnusable = async (it: Intent, foreign: boolean) => {
      await sleep(rnd.between(0, options.maxSleepMs * 2));
      signalsSent++;
      const via = foreign ? foreignEngine : (signalEngines[rnd.below(signalEngines.length)] as Engine);
      const payload = foreign ? it.payload : { intent: it.payload.intent, nonce: 7 };
      try {
        const res = await via.signal(it.tenantId, it.key, "confirmed", payload);
        if (foreign && res.duplicate) duplicateSignals++;
        else {
          acknowledgedUnusable++;
          problems.push(
            `${it.tenantId}/${it.key}: an ${foreign ? "other-version" : "invalid"} signal was acknowledged`,
          );
        }
      } catch (error) {
        const refused =
          error instanceof RunStateError ||
          (!foreign && (error instanceof InputValidationError || error instanceof IdempotencyKeyMismatchError));
        if (refused) unusableRefused++;
        else violation(`${it.tenantId}/${it.key}: an unusable signal raised ${String(error)}`);
      }
    };
    const unusableDone = Promise.all([
      ...intents.slice(intents.length - options.invalidSignals).map((it) => sendUnusable(it, false)),
      ...intents.slice(0, options.foreignSignals).map((it) => sendUnusable(it, true)),
    ]);
    const deliveriesDone = Promise.all(
      deliveries.map(async ({ it, at }) => {
        await sleep(at);
        await deliver(it, it.payload, false);
      }),
    ).then(async () => {
      // After the first delivery is in: another payload under the same name must be refused.
      await Promise.all(conflicted.map((it) => deliver(it, { ...it.payload, nonce: "forged" }, true)));
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
            else violation(`${it.tenantId}/${it.key}: a client got ${res.status} ${res.outcome}`);
          } catch (error) {
            if (error instanceof IdempotencyKeyInProgressError) answers.inProgress++;
            else violation(`${it.tenantId}/${it.key}: a client got ${String(error)}`);
          }
        }),
    );
    let kills = 0;
    const killsDone = (async () => {
      for (let single = 0; single < options.kills; single++) {
        await sleep(rnd.between(50, Math.max(100, options.maxSleepMs / 2)));
        if (options.killAllOnce && single === Math.floor(options.kills / 2)) {
          const all = [...workers];
          for (const w of all) w.kill("SIGKILL");
          await Promise.all(all.map(exited));
          kills += all.length;
          options.log(`durable: killed all ${all.length} workers at once`);
          await Promise.all(all.map(() => startWorker()));
        }
        const victim = [...workers][rnd.below(workers.size)];
        if (!victim) continue;
        victim.kill("SIGKILL");
        kills++;
        await exited(victim);
        await startWorker();
      }
    })();
    await Promise.all([deliveriesDone, unusableDone, clientsDone, killsDone]);

    // Every run finishes on the workers that are left (bounded by count; the timeout only catches a hang).
    const deadline = Date.now() + FINISH_TIMEOUT_MS;
    for (;;) {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs WHERE workflow = 'confirmation' AND status <> 'completed'
      `.execute(db);
      if ((rows[0]?.n ?? 0) === 0) break;
      if (Date.now() > deadline) {
        options.log(`durable: ${rows[0]?.n} runs not completed after the chaos`);
        break;
      }
      await sleep(250);
    }

    // The verdict, from the ledger.
    let duplicateEffects = 0;
    let lostIntents = 0;
    let signalsNotOnce = 0;
    let takeovers = 0;
    const { rows: effects } = await sql<{ key: string; phase: string; n: number }>`
      SELECT key, phase, count(*)::int AS n FROM shop.effects WHERE workflow = 'confirmation' GROUP BY key, phase
    `.execute(db);
    const { rows: captures } = await sql<{ key: string; nonce: string; n: number }>`
      SELECT key, min(nonce) AS nonce, count(*)::int AS n FROM shop.captures GROUP BY key
    `.execute(db);
    const { rows: stored } = await sql<{ key: string; n: number; payload: string }>`
      SELECT key, count(*)::int AS n, min(payload::text) AS payload FROM idempo.signals GROUP BY key
    `.execute(db);
    const count = (key: string, phase: string) => effects.find((e) => e.key === key && e.phase === phase)?.n ?? 0;
    for (const it of intents) {
      const where = `${it.tenantId}/${it.key}`;
      for (const phase of ["order_placed", "authorise", "capture"]) {
        const n = count(it.key, phase);
        if (n > 1) {
          duplicateEffects += n - 1;
          problems.push(`${where}: ${phase} committed ${n} times`);
        }
      }
      const capture = captures.find((c) => c.key === it.key);
      if ((capture?.n ?? 0) > 1) {
        duplicateEffects += (capture?.n ?? 0) - 1;
        problems.push(`${where}: captured ${capture?.n} times`);
      }
      if ((created.get(it.key) ?? 0) !== 1) violation(`${where}: enqueue created it ${created.get(it.key) ?? 0} times`);
      const record = await engine.inspect(it.tenantId, it.key);
      takeovers += Math.max(0, (record?.attempt ?? 1) - 1);
      const complete =
        record?.status === "completed" &&
        record.response?.status === 201 &&
        count(it.key, "order_placed") >= 1 &&
        count(it.key, "authorise") >= 1 &&
        count(it.key, "capture") >= 1 &&
        capture !== undefined;
      if (!complete) {
        lostIntents++;
        problems.push(
          `${where}: not completed with its capture (status ${record?.status}, response ${record?.response?.status})`,
        );
        continue;
      }
      const sig = stored.find((s) => s.key === it.key);
      const body = record.response?.body as { nonce?: string } | undefined;
      const state = record.state as { confirmed?: unknown };
      const once =
        sig?.n === 1 &&
        JSON.stringify(JSON.parse(sig.payload)) === JSON.stringify(it.payload) &&
        accepted.get(it.key) === 1 &&
        JSON.stringify(state.confirmed) === JSON.stringify(it.payload) &&
        body?.nonce === it.payload.nonce &&
        capture?.nonce === it.payload.nonce;
      if (accepted.get(it.key) === 1 && JSON.stringify(state.confirmed) !== JSON.stringify(it.payload)) {
        acknowledgedUnusable++;
        problems.push(`${where}: an accepted confirmation is not what the run merged`);
      }
      if (!once) {
        signalsNotOnce++;
        problems.push(
          `${where}: signal stored ${sig?.n ?? 0}x, accepted ${accepted.get(it.key) ?? 0}x, state ${JSON.stringify(state.confirmed)}, capture ${capture?.nonce}`,
        );
      }
    }
    for (const r of rolledBack) {
      if (await engine.inspect(r.tenantId, r.key)) violation(`${r.tenantId}/${r.key}: a rolled-back enqueue exists`);
    }
    if (conflictsRefused !== conflicted.length) {
      violation(`${conflictsRefused} of ${conflicted.length} conflicting confirmations refused`);
    }
    const report: DurableReport = {
      intents: intents.length,
      kills,
      signalsSent,
      duplicateSignals,
      wokeByDelivery: woke,
      conflictsRefused,
      unusableRefused,
      acknowledgedUnusable,
      clientAnswers: answers,
      takeovers,
      duplicateEffects,
      lostIntents,
      signalsNotOnce,
      otherViolations,
      problems,
      seconds: Math.round((Date.now() - started) / 1000),
    };
    clean = durablePassed(report);
    if (!clean) options.log(`durable: checks failed; database ${name} kept for inspection`);
    return report;
  } finally {
    await Promise.all(
      [...workers].map(async (w) => {
        w.send("stop", () => undefined);
        const timer = setTimeout(() => w.kill("SIGKILL"), 30_000);
        await exited(w);
        clearTimeout(timer);
      }),
    );
    await Promise.all([pool.end(), ...signalPools.map((p) => p.end())]);
    if (clean) await dropDatabase(options.serverUrl, name);
  }
}
