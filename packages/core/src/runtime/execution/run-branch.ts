/**
 * One branch of a `.parallel` item: recorded as started, reconciled when an
 * earlier attempt may have called it already, called with its derived key
 * (retries and timeout as a step's), and recorded with its result, while
 * the item's other branches do the same.
 */
import { UnstorableValueError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import { toJsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { deriveStepKey } from "../../keys/derived-key.js";
import { recordBranchResult, recordBranchStarted } from "../../store/branches.js";
import type { SpanScope } from "../../telemetry/telemetry.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { Branch } from "../../workflow/definition.js";
import { CrashSignal } from "./control-flow.js";
import type { ItemRun } from "./item-run.js";
import { control } from "./item-run.js";
import type { LeaseSignal } from "./step-call.js";
import { callStep, reconcileInDoubt } from "./step-call.js";
import { StepTries } from "./step-tries.js";

/**
 * What the branches of one item share besides the attempt: the signal that
 * stops them (the lease's, or the item's own once the attempt crashed) and
 * the check every branch makes before it writes.
 */
export interface BranchGate extends LeaseSignal {
  /** Throws the crash when the attempt crashed: a crashed attempt writes nothing more. */
  check(): void;
}

/** A branch that threw: what it threw, and the entry and calls to close as failed. */
export class BranchFailure {
  constructor(
    readonly error: unknown,
    readonly branch: string,
    readonly entryId: string | null,
    readonly tries: StepTries | null,
  ) {}
}

/**
 * Run one branch to its recorded result, which it returns as stored (the
 * JSON round trip a resume reads). Every error is thrown as a
 * {@link BranchFailure}, except a lost lease (the attempt is over) and an
 * injected crash, thrown as they are.
 */
export async function runBranch(
  run: ItemRun<"parallel">,
  branch: Branch,
  gate: BranchGate,
  span: SpanScope,
): Promise<JsonValue> {
  const { deps, plan, lease, item, info, hook } = run;
  const where = `branch '${branch.name}' of parallel '${item.name}'`;
  const point = `${item.name}/${branch.name}`;
  const idempotencyKey = deriveStepKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name, branch.name);
  if (span.recording) span.set({ "idempo.step.derived_key.hash": keyHash(plan.own.tenantId, idempotencyKey) });
  gate.check();
  const started = await recordBranchStarted(deps.db, deps.tables, plan.own, {
    name: item.name,
    branch: branch.name,
    attempt: plan.attempt,
    derivedKey: idempotencyKey,
  });
  if (!started) throw lease.lost();
  span.set({ "idempo.step.in_doubt": started.priorStarts > 0 });
  const tries = new StepTries();
  let result: unknown;
  let outcome: "succeeded" | "reconciled" = "succeeded";
  try {
    if (hook) await hook(`before:branch:${point}`);
    gate.check();
    result = await reconcileInDoubt(branch, started.priorStarts, info, idempotencyKey, lease, gate);
    if (result !== undefined) outcome = "reconciled";
    if (outcome === "succeeded") {
      const ctl = control();
      const onRetry = () =>
        deps.telemetry.count("stepRetries", { "idempo.workflow": plan.def.name, "idempo.item": item.name });
      const at = {
        workflow: plan.def.name,
        step: item.name,
        branch: branch.name,
        tenantId: plan.own.tenantId,
        key: plan.own.key,
        attempt: plan.attempt,
      };
      const asStep = { kind: "step", name: branch.name, run: branch.run, options: branch.options } as const;
      result = await lease.until(callStep(asStep, info, ctl, idempotencyKey, gate, onRetry, at, tries));
      ctl.rethrowCaught();
    }
    gate.check();
    if (hook) await hook(`called:branch:${point}`);
    gate.check();
  } catch (error) {
    // A crash or a lost lease ends the attempt, not just this branch.
    if (error instanceof CrashSignal || gate.aborted) throw error;
    throw new BranchFailure(error, branch.name, started.entryId, tries);
  }
  span.set({ "idempo.step.reconciled": outcome === "reconciled" });
  let text: string;
  try {
    text = resultText(result, where, deps.maxPayloadBytes);
  } catch (error) {
    throw new BranchFailure(error, branch.name, started.entryId, tries);
  }
  const entry = { entryId: started.entryId, outcome, result: text };
  if (!(await recordBranchResult(deps.db, deps.tables, plan.own, entry, plan.leaseMs, tries.toJson()))) {
    throw lease.lost();
  }
  if (hook) await hook(`after:branch:${point}`);
  return JSON.parse(text) as JsonValue;
}

/**
 * A branch's result as the JSON text its entry keeps: any JSON value,
 * nothing returned being `null`.
 *
 * @throws UnstorableValueError when it is not JSON; PayloadTooLargeError when it is over `maxBytes`.
 */
function resultText(result: unknown, where: string, maxBytes: number): string {
  const converted = toJsonValue(result === undefined ? null : result);
  if (!converted.ok) throw new UnstorableValueError(where, converted.issues);
  const text = JSON.stringify(converted.value);
  checkPayloadSize(`the result of ${where}`, text, maxBytes);
  return text;
}
