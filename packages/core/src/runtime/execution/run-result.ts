import type { JsonValue } from "../../json/json-value.js";
import type { RunOutcome } from "../../store/run-store.js";

/**
 * What `runOnce` returns. `replayed` is true when the response came from the
 * stored record of an earlier attempt (the body is then byte-identical to
 * the first one). Narrow on `outcome` to get the typed body:
 * - `succeeded`: the workflow's `respond` body;
 * - `failed`: a `ctx.fail` body, stored and replayed like any response;
 * - `errored`: the stored 500 problem body of `onUnknownError: 'store'`;
 * - `rejected`: a `ctx.reject` answer; nothing was stored, never replayed;
 * - `canceled`: an operator's `engine.cancel` answer, stored and replayed;
 * - `suspended`: the run is waiting (`.sleep` or `.waitFor`); status 202 and
 *   the workflow's `accepted` body (or `null`). Nothing final is stored yet:
 *   later calls with the key get `IdempotencyKeyInProgressError` until the
 *   run completes, then its stored response.
 */
export type RunResult<B> =
  | { readonly status: number; readonly body: B; readonly replayed: boolean; readonly outcome: "succeeded" }
  | {
      readonly status: number;
      readonly body: JsonValue;
      readonly replayed: boolean;
      readonly outcome: "failed" | "errored" | "rejected" | "canceled";
    }
  | { readonly status: 202; readonly body: JsonValue; readonly replayed: false; readonly outcome: "suspended" };

/** The stored response of a completed run, as every replay answers it (`replayed: true`). */
export function storedResult(
  status: number | null,
  body: string | null,
  outcome: RunOutcome | null,
): RunResult<unknown> {
  return {
    status: status ?? 500,
    body: JSON.parse(body ?? "null") as JsonValue,
    replayed: true,
    outcome: outcome ?? "succeeded",
  } as RunResult<unknown>;
}
