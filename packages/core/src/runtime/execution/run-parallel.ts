/**
 * The runner of a `.parallel` item: the branches not yet recorded are
 * called at once (at most `concurrency` at a time), each recorded the moment
 * it returns; once all are, the item commits their results into state.
 *
 * When a branch fails for good, no further branch starts and the running
 * ones settle (and stay recorded) before the item fails with the first
 * failure; a crash or a lost lease ends the item at once instead, as it
 * would end a process, with every later write of its branches refused.
 */
import { WorkflowUsageError } from "../../errors.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import { commitParallel, recordedBranches } from "../../store/branches.js";
import { recordFailure } from "../../store/progress.js";
import type { Branch } from "../../workflow/definition.js";
import { CrashSignal, FailThrow, RejectThrow } from "./control-flow.js";
import type { ItemRun, Outcome } from "./item-run.js";
import { advanced, completeWithFailure, itemProgress, withResponse } from "./item-run.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { BranchGate } from "./run-branch.js";
import { BranchFailure, runBranch } from "./run-branch.js";

/** A parallel item: run its unrecorded branches, then commit all their results. */
export async function runParallel(run: ItemRun<"parallel">): Promise<Outcome> {
  const { deps, plan, lease, item } = run;
  const results = new Map<string, JsonValue>();
  const kept = await recordedBranches(deps.db, deps.tables, plan.own, item.name);
  for (const [branch, text] of kept) results.set(branch, JSON.parse(text) as JsonValue);
  const pending = item.branches.filter((b) => !results.has(b.name));
  if (pending.length > 0) {
    const failure = await runBranches(run, pending, results);
    if (failure) return failed(run, failure, results);
  }
  const value: JsonObject = Object.fromEntries(item.branches.map((b) => [b.name, results.get(b.name) ?? null]));
  const { state, progress } = itemProgress(run, `parallel '${item.name}'`, { [item.name]: value }, value);
  const advance = await withResponse(run, progress, state);
  if (advance.response) lease.finishing();
  if (!(await commitParallel(deps.db, deps.tables, plan.own, advance))) throw lease.lost();
  return advanced(advance, state);
}

/** The signal and write check of one item's branches; `crash` ends them all. */
class Gate implements BranchGate {
  readonly #lease: LeaseKeeper;
  readonly #controller = new AbortController();
  #signal: AbortSignal | undefined;
  #crash: CrashSignal | undefined;

  constructor(lease: LeaseKeeper) {
    this.#lease = lease;
  }

  get abortSignal(): AbortSignal {
    this.#signal ??= AbortSignal.any([this.#lease.abortSignal, this.#controller.signal]);
    return this.#signal;
  }

  get aborted(): boolean {
    return this.#lease.aborted || this.#crash !== undefined;
  }

  check(): void {
    if (this.#crash) throw this.#crash;
  }

  crash(signal: CrashSignal): void {
    this.#crash ??= signal;
    this.#controller.abort(signal);
  }
}

/**
 * Call `pending` with at most `concurrency` in flight, putting each result
 * in `results`; the first definitive failure, once the running branches
 * settled, or undefined when every branch is recorded.
 *
 * @throws CrashSignal at once when a branch crashed; the lease's error at once when it was lost.
 */
async function runBranches(
  run: ItemRun<"parallel">,
  pending: readonly Branch[],
  results: Map<string, JsonValue>,
): Promise<BranchFailure | undefined> {
  const { deps, plan, lease, item } = run;
  const gate = new Gate(lease);
  const queue = [...pending];
  const failures: BranchFailure[] = [];
  let crashed!: (signal: CrashSignal) => void;
  const crash = new Promise<never>((_, reject) => {
    crashed = reject;
  });
  crash.catch(() => undefined);
  const lane = async (): Promise<void> => {
    // A failure stops the launches; the branches already running go on to their records.
    for (let branch = queue.shift(); branch && failures.length === 0; branch = queue.shift()) {
      const b = branch;
      const attributes = { "idempo.workflow": plan.def.name, "idempo.item": item.name, "idempo.branch": b.name };
      try {
        const value = await deps.telemetry.span(`branch ${item.name}/${b.name}`, "internal", attributes, (span) =>
          runBranch(run, b, gate, span),
        );
        results.set(b.name, value);
      } catch (error) {
        if (error instanceof CrashSignal) {
          gate.crash(error);
          crashed(error);
          return;
        }
        failures.push(error instanceof BranchFailure ? error : new BranchFailure(error, b.name, null, null));
      }
    }
  };
  const limit = Math.min(item.options.concurrency ?? pending.length, pending.length);
  const lanes = Promise.all(Array.from({ length: limit }, lane));
  // A lost lease or a crash ends the item now; the abandoned branches' writes are refused.
  await lease.until(Promise.race([lanes, crash]));
  const first = failures[0];
  if (!first) return undefined;
  // Close the entries of the branches that failed other than through ctx.fail or ctx.reject (stored below).
  for (const f of failures) {
    if (f.entryId === null || f.error instanceof FailThrow || f.error instanceof RejectThrow) continue;
    await recordFailure(deps.db, deps.tables, plan.own, {
      kind: "parallel",
      name: item.name,
      attempt: plan.attempt,
      error: f.error instanceof Error ? f.error.message : String(f.error),
      entryId: f.entryId,
      tries: f.tries?.toJson() ?? null,
    }).catch(() => undefined);
  }
  return first;
}

/**
 * The item failed with `failure`, its first definitive failure: `ctx.fail`
 * stores the branch's response; `ctx.reject` refuses the request only when
 * no branch is recorded (the executor then deletes the claim); anything
 * else is thrown for the executor's error path.
 */
async function failed(
  run: ItemRun<"parallel">,
  failure: BranchFailure,
  results: ReadonlyMap<string, JsonValue>,
): Promise<Outcome> {
  const { deps, item } = run;
  const error = failure.error;
  if (error instanceof FailThrow) {
    return completeWithFailure(run, {
      db: deps.db,
      failure: error,
      item: { kind: "parallel", name: item.name, entryId: failure.entryId, tries: failure.tries?.toJson() ?? null },
    });
  }
  if (error instanceof RejectThrow && results.size > 0) {
    throw new WorkflowUsageError(
      `ctx.reject called in branch '${failure.branch}' of parallel '${item.name}' of workflow '${run.plan.def.name}' ` +
        `after branch '${[...results.keys()][0]}' recorded its result; reject is only allowed before anything ` +
        "is recorded. Use ctx.fail to store a final response instead",
    );
  }
  throw error;
}
