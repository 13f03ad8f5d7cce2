/** The runner of a `.phase` item. */
import { PhaseConflictError } from "../../errors.js";
import { commitPhase } from "../../store/progress.js";
import { FailThrow } from "./control-flow.js";
import { isTransient, ranNothing } from "./db-errors.js";
import { claimFailure, claimInPhase } from "./folded-claim.js";
import type { ItemRun, Outcome } from "./item-run.js";
import { advanced, completeWithFailure, control, itemProgress, withResponse } from "./item-run.js";
import { phaseOutbox } from "./phase-outbox.js";
import { inPhaseTransaction } from "./phase-transaction.js";

/** Transient conflicts are retried up to this many tries... */
const PHASE_TRIES = 20;
/** ...and no longer than this, in ms: on a loaded database five quick tries were not enough. */
const PHASE_RETRY_BUDGET_MS = 10_000;
/** SPEC default of `lockTimeoutMs`. */
const DEFAULT_LOCK_TIMEOUT_MS = 5_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A `.phase` item: run its code in one transaction that also commits its
 * recovery point; retry transient conflicts, and work the database refused
 * without running it (within `unavailableRetryMs`).
 */
export async function runPhase(run: ItemRun<"phase">): Promise<Outcome> {
  const { deps, plan, lease, item, info } = run;
  const where = `phase '${item.name}'`;
  // An integer checked by the builder: safe to write into the SET statement.
  const lockTimeout = Math.trunc(plan.def.options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
  const started = Date.now();
  let refusedSince: number | undefined;
  let refusals = 0;
  for (let tries = 1; ; tries++) {
    try {
      // Every row-lock wait of this phase is bounded by lock_timeout (a stalled attempt may hold the rows it
      // needs); the transaction begins, with that setting, on the phase's first statement.
      const work = inPhaseTransaction(deps.phaseDb, lockTimeout, async ({ tx, committer }): Promise<Outcome> => {
        let result: unknown;
        // A run that starts here claims its key first, in this transaction (see folded-claim.ts).
        if (plan.claim?.pending) await claimInPhase(tx, deps.tables, plan.claim);
        try {
          const ctl = control();
          // Spelt out, not spread from `info`: a literal is made many times faster.
          result = await item.run({
            input: info.input,
            state: info.state,
            key: info.key,
            tenantId: info.tenantId,
            attempt: info.attempt,
            fail: ctl.fail,
            reject: ctl.reject,
            tx,
            outbox: phaseOutbox(deps, plan, item.name, tx),
          });
          ctl.rethrowCaught();
        } catch (error) {
          if (!(error instanceof FailThrow)) throw error;
          // Writes the phase made before ctx.fail commit with the stored response.
          return completeWithFailure(run, {
            db: tx,
            failure: error,
            item: { kind: "phase", name: item.name, entryId: null },
          });
        }
        const { state, progress } = itemProgress(run, where, result);
        const advance = await withResponse(run, progress, state);
        if (advance.response) lease.finishing();
        // A phase that never used tx commits its recovery point alone, in autocommit.
        if (!(await commitPhase(committer(), deps.tables, plan.own, advance))) throw lease.lost();
        return advanced(advance, state);
      });
      // A phase whose code hangs with its transaction open must not hold the attempt past its bound.
      const outcome = await lease.until(work);
      if (plan.claim) plan.claim.pending = false;
      return outcome;
    } catch (error) {
      // A first phase that chose its isolation level cannot hold the claim: asked again, claimed alone.
      const again = plan.claim?.pending ? claimFailure(plan.def, error) : error;
      if (again !== error) throw again;
      if (ranNothing(error)) {
        // A node that takes no writes, or no connection to be had: the phase ran nothing. During a
        // failover the new primary is usually there within seconds; try again until the bound.
        refusedSince ??= performance.now();
        const pause = Math.min(1_000, 50 * 2 ** Math.min(refusals++, 5));
        if (performance.now() - refusedSince + pause > deps.unavailableRetryMs) throw error;
        await sleep(pause * (0.5 + Math.random() / 2));
        continue;
      }
      if (!isTransient(error)) throw error;
      const elapsed = Date.now() - started;
      if (tries >= PHASE_TRIES || elapsed >= PHASE_RETRY_BUDGET_MS) {
        throw new PhaseConflictError(item.name, tries, elapsed, error);
      }
      // Serialization failure, deadlock or lock timeout: the transaction rolled back whole; try again after a jittered pause.
      await sleep(Math.random() * Math.min(500, 20 * 2 ** tries));
    }
  }
}
