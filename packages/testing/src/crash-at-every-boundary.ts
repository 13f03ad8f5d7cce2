import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { Engine, RunResult, Workflow } from "@idempo/core";
import { deriveStepKey, IdempotencyKeyInProgressError } from "@idempo/core";
import { CrashSignal, checkOptions, FUNCTION, OBJECT, optionShape, STRING } from "@idempo/core/internal";
import { boundariesOf, keyedCallsOf } from "./boundaries.js";
import { attachHook } from "./hook-registry.js";
import type { BoundaryResult, CrashReport, EffectCount } from "./report.js";
import { renderTable } from "./report.js";

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
}

/**
 * The input of every run, or a function that makes one per run (useful when
 * the business tables hold a unique constraint on part of the input).
 */
export type InputFor<In> = In | ((run: { readonly key: string; readonly point: string }) => In);

const OPTIONS = optionShape({ effects: OBJECT, requests: FUNCTION, tenantId: STRING, keyPrefix: STRING }, ["effects"]);

interface Settled {
  readonly value?: RunResult<unknown>;
  readonly error?: unknown;
}

const settle = (p: Promise<RunResult<unknown>>): Promise<Settled> =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : `a thrown ${typeof error}: ${String(error)}`;

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
 * Runs are sequential on the one engine. It installs a fault hook on
 * `engine` for the duration (replacing one set with `setFaultHook`
 * directly; `pauseAt` hooks are kept), so use an engine no other test uses
 * at the same time. A boundary the run without a crash never reaches (the
 * workflow finished earlier through `ctx.fail`) is reported as skipped.
 *
 * Not covered: a write a phase makes outside its `tx` is committed whether
 * or not the phase's transaction is, and no boundary falls between the two;
 * keep phase writes on `tx`.
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
  const points = boundariesOf(wf);
  const calls = keyedCallsOf(wf);
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

  // The hook sees every run on the engine; it acts on the current key only.
  let current: { key: string; crashAt: string | null; fired: boolean; reached: Set<string> } | undefined;
  const detach = attachHook(engine, (point, run) => {
    const c = current;
    if (!c || run.key !== c.key || run.tenantId !== tenantId) return;
    c.reached.add(point);
    if (c.crashAt === point && !c.fired) {
      c.fired = true;
      throw new CrashSignal(point);
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

  type Run = BoundaryResult & { readonly raw: Settled; readonly reached: ReadonlySet<string> };

  async function one(point: string | null, expected: Settled | null): Promise<Run> {
    const key = `${keyPrefix}${point ?? "none"}`;
    const problems: string[] = [];
    const run = () => settle(engine.runOnce(workflow, { tenantId, key, input: inputOf(key, point ?? "none") }));
    const before = await readEffects();
    const reached = new Set<string>();
    current = { key, crashAt: point, fired: false, reached };
    let final: Settled;
    try {
      const first = await run();
      if (point === null) {
        final = first;
        if (first.error !== undefined) problems.push(`the run without a crash failed: ${describe(first.error)}`);
        else if (first.value?.replayed) problems.push(`key '${key}' was already used: pick a fresh keyPrefix`);
      } else {
        if (!current.fired) {
          problems.push(
            `the run never reached ${point} although the run without a crash did; ` +
              `it ended with ${first.error === undefined ? `status ${first.value?.status}` : describe(first.error)} (is the workflow deterministic?)`,
          );
        } else if (!(first.error instanceof CrashSignal)) {
          problems.push(`the crash at ${point} was swallowed: the attempt ended with ${describe(first.error)}`);
        }
        const record = await engine.inspect(tenantId, key);
        if (record?.status === "in_flight") {
          const dup = await run();
          if (!(dup.error instanceof IdempotencyKeyInProgressError)) {
            problems.push(
              `a duplicate while the crashed attempt held the lease was not refused with 409: it got ${
                dup.error === undefined ? `status ${dup.value?.status}` : describe(dup.error)
              }`,
            );
          }
          await engine.release(tenantId, key);
        }
        final = await run();
        if (final.error !== undefined) problems.push(`the retry after the crash failed: ${describe(final.error)}`);
      }
    } finally {
      current = undefined;
    }

    const result = final.value;
    if (result && expected?.value) {
      const want = expected.value;
      if (result.status !== want.status || result.outcome !== want.outcome) {
        problems.push(
          `the retry answered ${result.status} (${result.outcome}); the run without a crash answered ${want.status} (${want.outcome})`,
        );
      }
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
      else if (actual !== e.perRun) problems.push(effectProblem(e.name, actual, e.perRun, point));
    });

    const record = await engine.inspect(tenantId, key);
    const derivedKeys: Record<string, string[]> = {};
    const wanted = (c: (typeof calls)[number]) => deriveStepKey(tenantId, key, wf.name, c.step, c.branch);
    const named = (c: (typeof calls)[number]) =>
      c.branch === undefined ? `step '${c.step}'` : `branch '${c.branch}' of parallel '${c.step}'`;
    for (const c of calls) {
      const mine = (h: { kind: string; name: string; branch: string | null }) =>
        c.branch === undefined
          ? h.kind === "step" && h.name === c.step
          : h.kind === "branch" && h.name === c.step && h.branch === c.branch;
      const keys = [...new Set((record?.history ?? []).filter(mine).map((h) => h.derivedKey))].map(String);
      derivedKeys[c.label] = keys;
      const want = wanted(c);
      if (keys.length > 1) problems.push(`${named(c)} ran under ${keys.length} derived keys across attempts`);
      else if (keys.length === 1 && keys[0] !== want) {
        problems.push(`${named(c)} ran under derived key '${keys[0]}', not '${want}'`);
      }
    }
    if (options.requests) {
      const log = await Promise.resolve().then(options.requests);
      for (const c of calls) {
        const want = wanted(c);
        const sent = log.filter((r) => r.idempotencyKey === want).map((r) => r.params);
        const distinct = sent.filter((p, i) => sent.findIndex((q) => isDeepStrictEqual(p, q)) === i);
        if (distinct.length > 1) {
          problems.push(
            `${named(c)} sent ${distinct.length} different params under one derived key across its calls: ` +
              "build what a step sends from input and state only, never from the clock or randomness inside the step",
          );
        }
      }
    }
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
    const { raw, reached, ...baseline } = await one(null, null);
    const boundaries: BoundaryResult[] = [];
    for (const point of points) {
      // Only the boundaries the run without a crash passed can be crashed at.
      if (raw.error !== undefined || !reached.has(point)) {
        boundaries.push(skipped(point));
        continue;
      }
      const { raw: _raw, reached: _reached, ...r } = await one(point, raw);
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

function effectProblem(name: string, actual: number, expected: number, point: string | null): string {
  const base = `'${name}' happened ${actual} time${actual === 1 ? "" : "s"}, expected ${expected}`;
  if (point === null) return `${base} in a run without a crash: does the counter read the right table and tenant?`;
  if (actual > expected && point.startsWith("called:step:")) {
    const step = point.slice("called:step:".length);
    return `${base}: step '${step}' was called again after the crash and the other system did not deduplicate; pass ctx.idempotencyKey to it (or give the step a reconcile)`;
  }
  if (actual > expected && point.startsWith("called:branch:")) {
    const branch = point.slice("called:branch:".length);
    return `${base}: branch '${branch}' was called again after the crash and the other system did not deduplicate; pass ctx.idempotencyKey to it (or give the branch a reconcile)`;
  }
  if (actual > expected) return `${base}: code outside a phase's transaction ran again on resume`;
  return `${base}: an effect was lost; is it written outside the phase's transaction?`;
}
