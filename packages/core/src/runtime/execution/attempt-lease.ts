import { AttemptTimeoutError, LeaseLostError } from "../../errors.js";
import { renewSlotLease } from "../../store/concurrency-slots.js";
import { renewLease } from "../../store/progress.js";
import { giveUpOwnLease } from "../../store/transitions.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { Item } from "../../workflow/definition.js";
import type { LeaseOps } from "./lease-keeper.js";
import type { ExecutorDeps, Plan } from "./plan.js";

/**
 * What an attempt's lease keeper does against the database, and the item the
 * attempt is at, which the attempt-bound error names.
 */
export class AttemptLease implements LeaseOps {
  current: Item | undefined;
  readonly #deps: ExecutorDeps;
  readonly #plan: Plan;

  constructor(deps: ExecutorDeps, plan: Plan) {
    this.#deps = deps;
    this.#plan = plan;
  }

  onLost(): void {
    const { def, own, attempt } = this.#plan;
    this.#deps.telemetry.count("leaseLost", { "idempo.workflow": def.name });
    this.#deps.telemetry.log(
      "warn",
      { workflow: def.name, tenantId: own.tenantId, keyHash: keyHash(own.tenantId, own.key), attempt },
      "idempo: lease lost; another attempt owns the run now, this one stops",
    );
  }

  renew(): Promise<boolean> {
    const deps = this.#deps;
    const { own, leaseMs, slot } = this.#plan;
    // Until the first phase commits its claim, the record is that transaction's alone: nothing to renew.
    if (deps.silentHeartbeat || this.#plan.claim?.pending) return Promise.resolve(true);
    // A slot's holder renews only while the slot is still its own (see renewSlotLease).
    return slot === undefined
      ? renewLease(deps.db, deps.tables, own, leaseMs)
      : renewSlotLease(deps.db, deps.tables, own, leaseMs, slot);
  }

  giveUp(): Promise<unknown> {
    return giveUpOwnLease(this.#deps.db, this.#deps.tables, this.#plan.own);
  }

  lostError(): LeaseLostError {
    return new LeaseLostError(this.#plan.own.tenantId, this.#plan.own.key, "a fenced write");
  }

  timeoutError(): AttemptTimeoutError {
    const { own, attemptTimeoutMs } = this.#plan;
    const current = this.current;
    return new AttemptTimeoutError(
      own.tenantId,
      own.key,
      attemptTimeoutMs,
      current ? `${current.kind} '${current.name}'` : "respond",
    );
  }
}
