/**
 * The operator of the durable scenario: while an intent waits for its
 * confirmation (which is held back until the operator is done), it rewinds
 * the run with `retryFrom("notify")`, so the phase that enqueued the
 * intent's outbox message runs again on whichever worker takes the run,
 * kills included. Without `resendOutbox` the message must reach the
 * receiver again only under its first delivery key; with it, under one
 * new key as well, and no more. The verdict counts both at the receiver
 * and the phase's commits in the ledger.
 */
import type { Engine } from "@idempo/core";
import { RunStateError } from "@idempo/core";
import type { Random } from "../random.ts";
import type { Findings, Intent } from "./durable-context.ts";
import { sleep } from "./durable-context.ts";

/** The phase the operator rewinds to; it enqueues the intent's message. */
export const REWOUND_PHASE = "notify";

/** The rewinds that took effect, by key, and how many asked for new delivery keys. */
export interface RetryFromTally {
  /** Rewinds that took effect, by key. */
  readonly rewound: Map<string, number>;
  /** Keys rewound with `resendOutbox: true`. */
  readonly resent: Set<string>;
  plain: number;
  resend: number;
}

/**
 * Rewind `it` once its run has committed `notify`: a `retryFrom` that
 * comes too early (the run still sleeps), or while a worker owns the run,
 * is refused with RunStateError and tried again a moment later, up to
 * `deadline` (epoch ms; only a run that never gets there reaches it).
 */
export async function rewindOnce(
  engine: Engine,
  it: Intent,
  resendOutbox: boolean,
  deps: {
    readonly rnd: Random;
    readonly tally: RetryFromTally;
    readonly findings: Findings;
    readonly deadline: number;
  },
): Promise<void> {
  const { tally, findings } = deps;
  for (;;) {
    try {
      await engine.retryFrom(it.tenantId, it.key, REWOUND_PHASE, resendOutbox ? { resendOutbox: true } : undefined);
      tally.rewound.set(it.key, (tally.rewound.get(it.key) ?? 0) + 1);
      if (resendOutbox) {
        tally.resent.add(it.key);
        tally.resend++;
      } else tally.plain++;
      return;
    } catch (error) {
      if (!(error instanceof RunStateError)) {
        findings.violation(`${it.tenantId}/${it.key}: retryFrom raised ${String(error)}`);
        return;
      }
    }
    if (Date.now() > deps.deadline) {
      findings.violation(`${it.tenantId}/${it.key}: retryFrom was refused until the deadline`);
      return;
    }
    await sleep(deps.rnd.between(30, 150));
  }
}
