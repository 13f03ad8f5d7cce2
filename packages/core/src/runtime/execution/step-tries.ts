/**
 * The calls of one step in one attempt, as its history entry keeps them:
 * each call's error and duration. Kept in memory while the step runs and
 * written with the step's result or failure, the write it makes anyway, so
 * a step that succeeds at its first try costs no extra round trip and
 * stores nothing (its one call is the entry itself).
 */
import type { StepTry } from "../operator/records.js";

/** Longest error text a try keeps, in characters; the entry's own `error` keeps the last one whole. */
const MAX_TRY_ERROR = 1_000;

/** A thrown value's message as a try keeps it: cut, and valid in a JSON column (no lone surrogate). */
function tryError(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const cut = text.length > MAX_TRY_ERROR ? `${text.slice(0, MAX_TRY_ERROR)}…` : text;
  return cut.replace(/\p{Cs}/gu, "\uFFFD");
}

/** The calls of one step in one attempt, oldest first. */
export class StepTries {
  readonly #tries: StepTry[] = [];

  /** Note a call that began at `startedMs` (`performance.now()`) and ended now, with what it threw if it threw. */
  ended(startedMs: number, failed: { readonly error: unknown } | undefined): void {
    const durationMs = Math.round((performance.now() - startedMs) * 1000) / 1000;
    this.#tries.push({ error: failed ? tryError(failed.error) : null, durationMs });
  }

  /** JSON text for the history entry; null for a single call, which the entry itself describes. */
  toJson(): string | null {
    return this.#tries.length > 1 ? JSON.stringify(this.#tries) : null;
  }
}
