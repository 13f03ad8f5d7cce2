/**
 * The durable scenario's verdict on its intents, from the ledger in
 * PostgreSQL: each phase committed once (`notify` once more per rewind the
 * operator made), each intent completed with its capture, and its
 * confirmation stored, accepted and merged exactly once with the payload
 * that was sent.
 */
import type { Engine } from "@idempo/core";
import { sql } from "kysely";
import type { Db } from "../database.ts";
import type { Findings, Intent } from "./durable-context.ts";
import { REWOUND_PHASE } from "./durable-retry-from.ts";

/** The counts of the verdict; the problems go to `findings`. */
export interface IntentVerdict {
  duplicateEffects: number;
  lostIntents: number;
  signalsNotOnce: number;
  acknowledgedUnusable: number;
  takeovers: number;
}

const PHASES = ["order_placed", "authorise", REWOUND_PHASE, "capture"];

/** Check every intent of workflow `confirmation`; see the file comment. */
export async function judgeIntents(
  db: Db,
  engine: Engine,
  intents: readonly Intent[],
  seen: {
    /** Enqueues that created the run, by key. */
    readonly created: ReadonlyMap<string, number>;
    /** Confirmations answered as new, by key. */
    readonly accepted: ReadonlyMap<string, number>;
    /** Rewinds to `notify` that took effect, by key. */
    readonly rewound: ReadonlyMap<string, number>;
  },
  findings: Findings,
): Promise<IntentVerdict> {
  const v: IntentVerdict = {
    duplicateEffects: 0,
    lostIntents: 0,
    signalsNotOnce: 0,
    acknowledgedUnusable: 0,
    takeovers: 0,
  };
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
    for (const phase of PHASES) {
      const n = count(it.key, phase);
      const allowed = 1 + (phase === REWOUND_PHASE ? (seen.rewound.get(it.key) ?? 0) : 0);
      if (n > allowed) {
        v.duplicateEffects += n - allowed;
        findings.note(`${where}: ${phase} committed ${n} times, ${allowed} expected`);
      }
      if (n < allowed && n > 0) {
        v.lostIntents++;
        findings.note(`${where}: ${phase} committed ${n} times, ${allowed} expected`);
      }
    }
    const capture = captures.find((c) => c.key === it.key);
    if ((capture?.n ?? 0) > 1) {
      v.duplicateEffects += (capture?.n ?? 0) - 1;
      findings.note(`${where}: captured ${capture?.n} times`);
    }
    const created = seen.created.get(it.key) ?? 0;
    if (created !== 1) findings.violation(`${where}: enqueue created it ${created} times`);
    const record = await engine.inspect(it.tenantId, it.key);
    v.takeovers += Math.max(0, (record?.attempt ?? 1) - 1);
    const complete =
      record?.status === "completed" &&
      record.response?.status === 201 &&
      PHASES.every((phase) => count(it.key, phase) >= 1) &&
      capture !== undefined;
    if (!complete) {
      v.lostIntents++;
      findings.note(
        `${where}: not completed with its capture (status ${record?.status}, response ${record?.response?.status})`,
      );
      continue;
    }
    const sig = stored.find((s) => s.key === it.key);
    const body = record.response?.body as { nonce?: string } | undefined;
    const state = record.state as { confirmed?: unknown };
    const accepted = seen.accepted.get(it.key) ?? 0;
    const merged = JSON.stringify(state.confirmed) === JSON.stringify(it.payload);
    const once =
      sig?.n === 1 &&
      JSON.stringify(JSON.parse(sig.payload)) === JSON.stringify(it.payload) &&
      accepted === 1 &&
      merged &&
      body?.nonce === it.payload.nonce &&
      capture?.nonce === it.payload.nonce;
    if (accepted === 1 && !merged) {
      v.acknowledgedUnusable++;
      findings.note(`${where}: an accepted confirmation is not what the run merged`);
    }
    if (!once) {
      v.signalsNotOnce++;
      findings.note(
        `${where}: signal stored ${sig?.n ?? 0}x, accepted ${accepted}x, state ${JSON.stringify(state.confirmed)}, capture ${capture?.nonce}`,
      );
    }
  }
  return v;
}
