import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { Engine, Workflow } from "@idempo/core";
import { deriveChildKey } from "@idempo/core";
import { CrashSignal, checkOptions, FUNCTION, OBJECT, optionShape, STRING } from "@idempo/core/internal";
import { childItemsOf, crashPointsOf, keyedCallsOf, VisitCounter } from "./boundaries.js";
import type { Settled } from "./drive-run.js";
import { describe, driveToEnd, settle } from "./drive-run.js";
import { attachHook } from "./hook-registry.js";
import type { BoundaryResult, CrashReport, EffectCount } from "./report.js";
import { renderTable } from "./report.js";
import { checkChildren, checkParams, derivedKeysOf, effectProblem } from "./run-checks.js";

/** Reads how often an effect has happened so far: rows in a table, calls a fake provider saw. */
export type EffectCounter = () => number | Promise<number>;

/**
 * An effect to check: a counter, or a counter with the number of times one
 * completed run should change it (Default: 1).
 */
export type Effect = EffectCounter | { readonly count: EffectCounter; readonly perRun: number };

/** One request as the downstream side saw it: the idempotency key it carried and its params. */
export interface RecordedRequest {
  readonly idempotencyKey: string;
  readonly params: unknown;
}

/** Reads every request a fake provider (or a wire recorder) has seen so far. */
export type RequestLog = () => readonly RecordedRequest[] | Promise<readonly RecordedRequest[]>;

/** Options of {@link crashAtEveryBoundary}. */
export interface CrashAtEveryBoundaryOptions {
  /**
   * The effects that must happen exactly `perRun` times per completed run,
   * by name (the name is the column in the report). Counters are read
   * before and after each run; only the change counts, so they may be
   * global (all rows of a table), as long as nothing else changes them
   * while the helper runs.
   *
   * @example
   * { orders: () => countOrders(db), charges: () => provider.charges, receipts: { count: countReceipts, perRun: 1 } }
   */
  effects: Readonly<Record<string, Effect>>;
  /**
   * The requests the downstream side saw (Default: not checked). When given,
   * every request a step sent under its derived key must carry the same
   * params (deep equality) on every attempt: a step that puts `Date.now()`,
   * a random nonce or anything else read inside the step into what it sends
   * is flagged at the boundary where a retry sent other params under the
   * same key, which a provider refuses (Stripe: 400) or, worse, ignores.
   *
   * @example
   * requests: () => provider.requests // [{ idempotencyKey, params }, ...]
   */
  requests?: RequestLog;
  /** Tenant of every run (Default: `"test"`). */
  tenantId?: string;
  /**
   * Prefix of the idempotency keys; each run uses `<prefix><boundary>`, and
   * the run without a crash `<prefix>none` (Default: `crash-` plus 8 random
   * hex digits and `-`, so repeated test runs on one database never replay
   * each other's records).
   */
  keyPrefix?: string;
  /**
   * The payload of the signal each `.waitFor` gets, by the wait's name, or
   * a function making it per run (Default: none). When a run suspends at a
   * wait, the helper sends it with `engine.signal` and resumes the run; a
   * run that waits for a signal not given here fails its boundary.
   *
   * @example
   * signals: { approved: { by: 'ops' }, shipped: ({ key }) => ({ tracking: `t-${key}` }) }
   */
  signals?: Readonly<Record<string, unknown>>;
}

/**
 * The input of every run, or a function that makes one per run (useful when
 * the business tables hold a unique constraint on part of the input).
 */
export type InputFor<In> = In | ((run: { readonly key: string; readonly point: string }) => In);

const OPTIONS = optionShape(
  { effects: OBJECT, requests: FUNCTION, tenantId: STRING, keyPrefix: STRING, signals: OBJECT },
  ["effects"],
);

/**
 * Crash a run of `workflow` at every boundary, let a retry take it over, and
 * check that every declared effect happened exactly once per run.
 *
 * First one run without a crash checks the counters and fixes the expected
 * status. Then, for each boundary (see {@link boundariesOf}), on a fresh key:
 * 1. run the workflow and crash it at the boundary (the attempt stops as a
 *    killed process would: no clean-up, no further writes);
 * 2. while the crashed attempt's lease is valid, a duplicate must be refused
 *    with 409 `IdempotencyKeyInProgressError`;
 * 3. `engine.release` the lease and run again: the retry takes over and
 *    finishes from the last recovery point (or replays, when the crash came
 *    after the run completed); its status must match the run without a crash;
 * 4. one more duplicate must replay the same body;
 * 5. each effect must have changed by exactly its `perRun`, and every
 *    attempt must have used one derived key per step (and per branch of a
 *    `.parallel` item), the one `deriveStepKey` gives; with `requests`,
 *    every request sent under a step's derived key must carry the same params.
 *
 * A run that suspends (`.child`, `.map`, `.sleep`, `.waitFor`) is taken on
 * as `idempo resume` would: the helper sends the signal a wait needs (see
 * `signals`) and resumes the due runs of the workflow and of its children's
 * workflows, in this process, until the run completes; a boundary of the
 * visit after the wake-up (`read:map:<item>#2`, say) is crashed in that
 * resumed attempt and recovered by the same steps 2 and 3. The first child
 * of each `.child` and `.map` item is crashed too, at each boundary of its
 * own workflow (reported as `<item>[0]:<point>`, right after
 * `after:<kind>:<item>`); its lease is released and `resumeStale` takes it
 * over, as a worker would. Each item must then have started as many
 * children as in the run without a crash, each under the key
 * `deriveChildKey` gives, each completed; count the children's effects as
 * any other. A sleep must take 0 ms in the test: the helper does not move
 * time.
 *
 * Runs are sequential on the one engine. It installs a fault hook on
 * `engine` for the duration (replacing one set with `setFaultHook`
 * directly; `pauseAt` hooks are kept), so use an engine no other test uses
 * at the same time, and run no worker for these workflows beside it. A
 * boundary the run without a crash never reaches (the workflow finished
 * earlier through `ctx.fail`, a `.map` over no input) is reported as skipped.
 *
 * Not covered: a write a phase makes outside its `tx` is committed whether
 * or not the phase's transaction is, and no boundary falls between the two;
 * keep phase writes on `tx`. Only the first child of an item is crashed,
 * and a grandchild not at all: test the child workflow with its own
 * `crashAtEveryBoundary` too.
 *
 * @example
 * const report = await crashAtEveryBoundary(engine, checkout, { cartId: 'c1', amountCents: 4200 }, {
 *   effects: { orders: () => countOrders(db), charges: () => provider.charges },
 * })
 * assertExactlyOnce(report) // throws with the report's table when a boundary failed
 *
 * @throws InvalidOptionError when `options` holds an unknown key or a value of the wrong type, before any run.
 */
export async function crashAtEveryBoundary<In, B>(
  engine: Engine,
  workflow: Workflow<In, B>,
  input: InputFor<In>,
  options: CrashAtEveryBoundaryOptions,
): Promise<CrashReport> {
  checkOptions("crashAtEveryBoundary", OPTIONS, options);
  const wf = workflow as Workflow<unknown, unknown>;
  const points = crashPointsOf(wf);
  const inner = new Map(points.flatMap((p) => (p.child ? [[p.label, p.child.point] as const] : [])));
  const calls = keyedCallsOf(wf);
  const childItems = childItemsOf(wf);
  const tenantId = options.tenantId ?? "test";
  const keyPrefix = options.keyPrefix ?? `crash-${randomUUID().slice(0, 8)}-`;
  const effects = Object.entries(options.effects ?? {}).map(([name, e]) =>
    typeof e === "function" ? { name, count: e, perRun: 1 } : { name, count: e.count, perRun: e.perRun },
  );
  if (effects.length === 0) throw new TypeError("crashAtEveryBoundary needs at least one effect to count");
  for (const e of effects) {
    if (typeof e.count !== "function" || !Number.isSafeInteger(e.perRun) || e.perRun < 0) {
      throw new TypeError(`effect '${e.name}' needs a counter function and a perRun count of 0 or more`);
    }
  }
  const inputOf = (key: string, point: string): In =>
    typeof input === "function" ? (input as (run: { key: string; point: string }) => In)({ key, point }) : input;

  // The hook sees every run on the engine; it acts on the current key and its first children only, and counts
  // each run's visits of each point.
  interface Current {
    key: string;
    crashAt: string | null;
    fired: boolean;
    reached: Set<string>;
    visits: VisitCounter;
    /** The first child of each `.child` and `.map` item, by key. */
    children: Map<string, { item: string; visits: VisitCounter }>;
  }
  let current: Current;
  let active = false;
  const detach = attachHook(engine, (point, run) => {
    const c = current;
    if (!active || run.tenantId !== tenantId) return;
    const child = run.key === c.key ? undefined : c.children.get(run.key);
    if (run.key !== c.key && !child) return;
    const label = child ? `${child.item}[0]:${child.visits.label(point)}` : c.visits.label(point);
    c.reached.add(label);
    if (c.crashAt === label && !c.fired) {
      c.fired = true;
      throw new CrashSignal(label);
    }
  });

  // A counter may return a count as a string (pg does for bigint); anything not a finite number counts as broken.
  const readEffects = async (): Promise<(number | null)[]> =>
    Promise.all(
      effects.map((e) =>
        Promise.resolve()
          .then(e.count)
          .then(
            (v) => (Number.isFinite(Number(v)) ? Number(v) : null),
            () => null,
          ),
      ),
    );

  type Run = BoundaryResult & {
    readonly raw: Settled;
    readonly reached: ReadonlySet<string>;
    readonly children: Record<string, number>;
  };

  async function one(point: string | null, expected: Run | null): Promise<Run> {
    const key = `${keyPrefix}${point ?? "none"}`;
    const problems: string[] = [];
    const run = () => settle(engine.runOnce(workflow, { tenantId, key, input: inputOf(key, point ?? "none") }));
    const before = await readEffects();
    const reached = new Set<string>();
    const firstChildren = new Map(
      childItems.map((item) => [deriveChildKey(tenantId, key, wf.name, item, 0), { item, visits: new VisitCounter() }]),
    );
    current = { key, crashAt: point, fired: false, reached, visits: new VisitCounter(), children: firstChildren };
    active = true;
    let final: Settled;
    try {
      const first = await run();
      const crashed = current.fired;
      if (point === null) {
        if (first.value?.replayed) problems.push(`key '${key}' was already used: pick a fresh keyPrefix`);
      } else if (crashed && !(first.error instanceof CrashSignal)) {
        problems.push(`the crash at ${point} was swallowed: the attempt ended with ${describe(first.error)}`);
      }
      const drive = { engine, workflow: wf, tenantId, key, point, call: run, problems, signals: options.signals };
      final = await driveToEnd({ ...drive, fired: () => current.fired }, first, crashed);
      if (point !== null && !current.fired) {
        problems.push(
          `the run never reached ${point} although the run without a crash did; ` +
            `it ended with ${final.error === undefined ? `status ${final.value?.status}` : describe(final.error)} (is the workflow deterministic?)`,
        );
      }
    } finally {
      active = false;
    }

    const result = final.value;
    const want = expected?.raw.value;
    if (result && want && (result.status !== want.status || result.outcome !== want.outcome)) {
      problems.push(
        `the retry answered ${result.status} (${result.outcome}); the run without a crash answered ${want.status} (${want.outcome})`,
      );
    }
    if (result && result.outcome !== "rejected") {
      const replay = await run();
      if (replay.error !== undefined) problems.push(`a duplicate after completion failed: ${describe(replay.error)}`);
      else if (!replay.value?.replayed || !isDeepStrictEqual(replay.value.body, result.body)) {
        problems.push(
          `a duplicate after completion did not replay the stored response (replayed: ${replay.value?.replayed})`,
        );
      }
    }

    const after = await readEffects();
    const counts: Record<string, EffectCount> = {};
    effects.forEach((e, i) => {
      const b = before[i];
      const a = after[i];
      const actual = a === null || a === undefined || b === null || b === undefined ? null : a - b;
      counts[e.name] = { expected: e.perRun, actual };
      if (actual === null) problems.push(`the counter of '${e.name}' threw or returned something other than a number`);
      else if (actual !== e.perRun) {
        problems.push(effectProblem(e.name, actual, e.perRun, point === null ? null : (inner.get(point) ?? point)));
      }
    });

    const record = await engine.inspect(tenantId, key);
    const checked = { tenantId, key, workflow: wf.name, record };
    const derivedKeys = derivedKeysOf(checked, calls, problems);
    if (options.requests) checkParams(checked, calls, await Promise.resolve().then(options.requests), problems);
    const children = checkChildren(checked, childItems, expected?.children ?? null, problems);
    if (result && result.outcome !== "rejected" && record?.status !== "completed") {
      problems.push(`the record is ${record ? record.status : "missing"} after the run answered`);
    }

    return {
      point: point ?? "none",
      key,
      outcome: problems.length === 0 ? "passed" : "failed",
      status: result?.status ?? null,
      attempts: record?.attempt ?? null,
      effects: counts,
      derivedKeys,
      problems,
      raw: final,
      reached,
      children,
    };
  }

  const skipped = (point: string): BoundaryResult => ({
    point,
    key: `${keyPrefix}${point}`,
    outcome: "skipped",
    status: null,
    attempts: null,
    effects: {},
    derivedKeys: {},
    problems: [],
  });

  try {
    const base = await one(null, null);
    const { raw, reached, children: _children, ...baseline } = base;
    const boundaries: BoundaryResult[] = [];
    for (const { label: point } of points) {
      // Only the boundaries the run without a crash passed can be crashed at.
      if (raw.error !== undefined || !reached.has(point)) {
        boundaries.push(skipped(point));
        continue;
      }
      const { raw: _raw, reached: _reached, children: _c, ...r } = await one(point, base);
      boundaries.push(r);
    }
    const rows = [baseline, ...boundaries];
    const failures = rows.filter((r) => r.outcome === "failed");
    return {
      ok: failures.length === 0,
      workflow: wf.name,
      tenantId,
      baseline,
      boundaries,
      failures,
      table: renderTable(
        wf.name,
        rows,
        effects.map((e) => e.name),
      ),
    };
  } finally {
    detach();
  }
}
