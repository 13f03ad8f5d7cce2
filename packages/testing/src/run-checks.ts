/**
 * What `crashAtEveryBoundary` checks of a finished run besides its effects:
 * one derived key per step and branch, the same params under each of them,
 * and the children of each `.child` and `.map` item, once each under the
 * keys derived from the parent.
 */
import { isDeepStrictEqual } from "node:util";
import type { RunRecord, TombstoneRecord } from "@idempo/core";
import { deriveChildKey, deriveStepKey } from "@idempo/core";
import type { KeyedCall } from "./boundaries.js";

/** The run being checked. */
interface Checked {
  readonly tenantId: string;
  readonly key: string;
  readonly workflow: string;
  readonly record: RunRecord | TombstoneRecord | null;
}

const named = (c: KeyedCall) =>
  c.branch === undefined ? `step '${c.step}'` : `branch '${c.branch}' of parallel '${c.step}'`;

const wanted = (r: Checked, c: KeyedCall) => deriveStepKey(r.tenantId, r.key, r.workflow, c.step, c.branch);

/** The distinct derived keys each call ran under, by label; a problem for a call with several or a wrong one. */
export function derivedKeysOf(r: Checked, calls: readonly KeyedCall[], problems: string[]): Record<string, string[]> {
  const derivedKeys: Record<string, string[]> = {};
  for (const c of calls) {
    const mine = (h: { kind: string; name: string; branch: string | null }) =>
      c.branch === undefined
        ? h.kind === "step" && h.name === c.step
        : h.kind === "branch" && h.name === c.step && h.branch === c.branch;
    const keys = [...new Set((r.record?.history ?? []).filter(mine).map((h) => h.derivedKey))].map(String);
    derivedKeys[c.label] = keys;
    const want = wanted(r, c);
    if (keys.length > 1) problems.push(`${named(c)} ran under ${keys.length} derived keys across attempts`);
    else if (keys.length === 1 && keys[0] !== want) {
      problems.push(`${named(c)} ran under derived key '${keys[0]}', not '${want}'`);
    }
  }
  return derivedKeys;
}

/** A problem for each call that sent different params under its derived key. */
export function checkParams(
  r: Checked,
  calls: readonly KeyedCall[],
  log: readonly { readonly idempotencyKey: string; readonly params: unknown }[],
  problems: string[],
): void {
  for (const c of calls) {
    const want = wanted(r, c);
    const sent = log.filter((q) => q.idempotencyKey === want).map((q) => q.params);
    const distinct = sent.filter((p, i) => sent.findIndex((q) => isDeepStrictEqual(p, q)) === i);
    if (distinct.length > 1) {
      problems.push(
        `${named(c)} sent ${distinct.length} different params under one derived key across its calls: ` +
          "build what a step sends from input and state only, never from the clock or randomness inside the step",
      );
    }
  }
}

/**
 * How many children each `.child` and `.map` item started, by item; a
 * problem for a child under another key than `deriveChildKey` gives, one
 * not completed, or (with `expected`, the counts of the run without a
 * crash) a count that differs.
 */
export function checkChildren(
  r: Checked,
  items: readonly string[],
  expected: Readonly<Record<string, number>> | null,
  problems: string[],
): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) {
    const children = (r.record?.children ?? []).filter((c) => c.item === item);
    counts[item] = children.length;
    const want = expected?.[item];
    if (want !== undefined && children.length !== want) {
      problems.push(`item '${item}' started ${children.length} children; the run without a crash started ${want}`);
    }
    for (const c of children) {
      const key = deriveChildKey(r.tenantId, r.key, r.workflow, item, c.index);
      if (c.key !== key) problems.push(`child ${c.index} of '${item}' ran under key '${c.key}', not '${key}'`);
      if (c.status !== "completed") problems.push(`child ${c.index} of '${item}' is ${c.status}, not completed`);
    }
  }
  return counts;
}

/** The problem of an effect that happened `actual` times instead of `expected`, with a hint. */
export function effectProblem(name: string, actual: number, expected: number, point: string | null): string {
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
