/**
 * What one attempt runs with: the plan (the run, its recovery point and its
 * bounds) and the engine's dependencies the executor and its item runners share.
 */
import type { JsonObject } from "../../json/json-value.js";
import type { Bucket } from "../../store/rate-limits.js";
import type { Executor, Ownership, Tables } from "../../store/run-store.js";
import type { SpanScope, Telemetry } from "../../telemetry/telemetry.js";
import type { Definition } from "../../workflow/definition.js";
import type { FoldedClaim } from "./folded-claim.js";
import type { FaultHook } from "./hooks.js";

/** Everything an attempt needs to run from its recovery point. */
export interface Plan {
  readonly def: Definition;
  readonly own: Ownership;
  readonly attempt: number;
  readonly input: unknown;
  readonly state: JsonObject;
  readonly recoveryPoint: string | null;
  readonly leaseMs: number;
  /** The span of the runOnce call (or resume) this attempt runs in. */
  readonly span: SpanScope;
  /** The attempt bound: past it the attempt gives the key up and its signal aborts. */
  readonly attemptTimeoutMs: number;
  /** The concurrency key whose slot the attempt holds (its heartbeat keeps it); absent without `.concurrency`. */
  readonly slot?: string;
  /** A new key this attempt claims inside its first phase; absent when the key was claimed before the attempt. */
  readonly claim?: FoldedClaim;
}

export interface ExecutorDeps {
  /** The engine's own statements: the application's Kysely without its plugins. */
  readonly db: Executor & { transaction: Executor["transaction"] };
  /** The application's Kysely as given, plugins included: what a phase's `tx` is made from. */
  readonly phaseDb: Executor & { transaction: Executor["transaction"] };
  readonly tables: Tables;
  /** Fixed heartbeat interval; `undefined` = a third of the run's lease. */
  readonly heartbeatMs: number | undefined;
  readonly hook: FaultHook | undefined;
  readonly telemetry: Telemetry;
  /** Test hook: no renewals at all (a zombie in the making). */
  readonly silentHeartbeat: boolean;
  /** The bound on each stored value, in canonical JSON UTF-8 bytes (`maxPayloadBytes`). */
  readonly maxPayloadBytes: number;
  /** The engine's rate limits by name (`rateLimits`), for steps with a `rateLimit`. */
  readonly rateLimits: ReadonlyMap<string, Bucket>;
  /** How long work the database refused without running it is tried again, ms (`unavailableRetryMs`). */
  readonly unavailableRetryMs: number;
}
