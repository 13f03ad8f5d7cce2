/**
 * Range checks for every duration and count option, with one wording:
 * "<where>: <option> must be an integer from <min> to <max>, got <value>".
 * Durations that end up in a timer are capped at Node's limit (see `limits.ts`).
 */
import { InvalidOptionError } from "../errors.js";
import { describeValue } from "./option-shape.js";

/**
 * `value` when it is an integer in `[min, max]`, `fallback` when undefined
 * (so the result is `number` with a numeric fallback, and may be undefined
 * without one).
 *
 * @throws InvalidOptionError naming `where`, the option and the range.
 */
export function intOption<Fallback extends number | undefined = undefined>(
  where: string,
  name: string,
  value: unknown,
  min: number,
  max: number,
  fallback?: Fallback,
): number | Fallback {
  if (value === undefined) return fallback as Fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(
      name,
      `${where}: ${name} must be an integer from ${min.toLocaleString("en")} to ${max.toLocaleString("en")}, got ${typeof value === "number" ? value : describeValue(value)}`,
    );
  }
  return value;
}

/**
 * A heartbeat must fire well inside the lease it renews, or a live run is
 * taken over between two beats.
 *
 * @throws InvalidOptionError when `heartbeatMs` is not below half of `leaseMs`.
 */
export function checkHeartbeat(where: string, heartbeatMs: number | undefined, leaseMs: number): void {
  if (heartbeatMs !== undefined && heartbeatMs * 2 > leaseMs) {
    throw new InvalidOptionError(
      "heartbeatMs",
      `${where}: heartbeatMs (${heartbeatMs}) must be at most half of the lease (leaseMs ${leaseMs}), ` +
        "or a live run is taken over between two renewals",
    );
  }
}
