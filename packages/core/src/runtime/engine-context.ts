/**
 * What every engine service shares: the database handles, the schema's
 * tables, the engine-wide settings, telemetry, the completion waiter and the
 * workflows the engine knows. `createEngine` makes one and hands it to each
 * service, so a service can be built (and tested) from a context alone.
 */
import { WorkflowDefinitionError } from "../errors.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES } from "../json/payload-size.js";
import { ENGINE_OPTIONS } from "../options/known-options.js";
import { MAX_STORED_MS, MAX_TIMER_MS } from "../options/limits.js";
import { checkHeartbeat, intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import type { Tables } from "../store/run-store.js";
import { tablesIn } from "../store/run-store.js";
import { SILENT } from "../telemetry/logger.js";
import { keyHash, Telemetry } from "../telemetry/telemetry.js";
import type { Definition } from "../workflow/definition.js";
import { deployedByName } from "../workflow/versions.js";
import { listenChecks } from "./background/listen-options.js";
import type { EngineOptions } from "./engine-options.js";
import { faultHookOf, heartbeatSilenced } from "./execution/hooks.js";
import type { ExecutorDeps } from "./execution/plan.js";
import { KnownWorkflows } from "./known-workflows.js";
import { checkRateLimitNames, rateLimitsOf } from "./rate-limit-options.js";
import type { CompletionWaiter } from "./signal-delivery/completion-waiter.js";
import { completionWaiter } from "./signal-delivery/completion-waiter.js";

/** The engine's database handle: a Kysely instance (or transaction) seen through the executor's seam. */
type EngineDb = ExecutorDeps["db"];

export interface EngineContext {
  /** The engine's own statements: the application's Kysely without its plugins. */
  readonly db: EngineDb;
  /** The application's Kysely as given, plugins included: what a phase's `tx` is made from. */
  readonly appDb: EngineDb;
  readonly tables: Tables;
  /** Lease length in ms when a workflow sets none. */
  readonly leaseMs: number;
  /** Fixed heartbeat interval in ms; `undefined` = a third of each run's lease. */
  readonly heartbeatMs: number | undefined;
  /** Retention in ms when a workflow sets none. */
  readonly retentionMs: number;
  /** Attempt bound in ms when a workflow sets none. */
  readonly attemptTimeoutMs: number;
  /** The bound on each stored value, in canonical JSON UTF-8 bytes. */
  readonly maxPayloadBytes: number;
  readonly telemetry: Telemetry;
  readonly waiter: CompletionWaiter;
  readonly workflows: KnownWorkflows;
  /** What the executor needs for an attempt that starts now (the fault hooks attached to the engine at this moment). */
  executorDeps(): ExecutorDeps;
}

const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;
/** Long enough for any healthy request or job, short enough that a hung one frees its key the same hour. */
const DEFAULT_ATTEMPT_TIMEOUT_MS = 15 * 60 * 1000;
/** A Patroni failover takes 1-3 s, a whole node lost about 10 s (docs/operations.md). */
const DEFAULT_UNAVAILABLE_RETRY_MS = 10_000;

/**
 * Check the engine's options and make its context. `engine` is the engine
 * object the fault hooks are attached to (read per attempt, not now).
 *
 * @throws InvalidOptionError when an option is unknown (naming the known ones), of the wrong type, or out of range.
 * @throws WorkflowDefinitionError when the schema name is not a plain SQL identifier.
 */
export function createContext<DB>(options: EngineOptions<DB>, engine: () => object): EngineContext {
  checkOptions("createEngine", ENGINE_OPTIONS, options);
  const appDb = options.db as unknown as EngineDb;
  // The engine reads its own columns by their names: the application's plugins (CamelCasePlugin) are for its rows.
  const db = typeof appDb?.withoutPlugins === "function" ? appDb.withoutPlugins() : appDb;
  const where = "createEngine";
  const unavailableRetryMs = intOption(
    where,
    "unavailableRetryMs",
    options.unavailableRetryMs,
    0,
    MAX_TIMER_MS,
    DEFAULT_UNAVAILABLE_RETRY_MS,
  );
  const tables = tablesIn(options.schema ?? "idempo", options.preparedStatements ?? true, unavailableRetryMs);
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(tables.schema)) {
    throw new WorkflowDefinitionError(`schema must be a plain SQL identifier, got ${JSON.stringify(tables.schema)}`);
  }
  const leaseMs = intOption(where, "leaseMs", options.leaseMs, 1, MAX_TIMER_MS, DEFAULT_LEASE_MS);
  // Unset, the heartbeat follows each run's own lease (a workflow may shorten it).
  const heartbeatMs = intOption(where, "heartbeatMs", options.heartbeatMs, 1, MAX_TIMER_MS);
  checkHeartbeat(where, heartbeatMs, leaseMs);
  const retentionMs = intOption(where, "retentionMs", options.retentionMs, 1, MAX_STORED_MS, DEFAULT_RETENTION_MS);
  const attemptTimeoutMs = intOption(
    where,
    "attemptTimeoutMs",
    options.attemptTimeoutMs,
    1,
    MAX_TIMER_MS,
    DEFAULT_ATTEMPT_TIMEOUT_MS,
  );
  const maxPayloadBytes = intOption(
    where,
    "maxPayloadBytes",
    options.maxPayloadBytes,
    1,
    MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_PAYLOAD_BYTES,
  );
  const telemetry = new Telemetry(options.logger ?? SILENT);
  const waiter = completionWaiter(
    options.listen,
    listenChecks(where, options),
    (error) =>
      telemetry.log("warn", { error: String(error) }, "idempo: LISTEN for completions failed; waiters poll instead"),
    () => telemetry.log("info", {}, "idempo: LISTEN for completions re-established; NOTIFY wakes waiters again"),
  );
  const rateLimits = rateLimitsOf(where, options.rateLimits);
  // Every workflow the engine is given is checked once: a step's rateLimit must name one of these.
  const workflows = new KnownWorkflows((def) => checkRateLimitNames(def, rateLimits));
  if (options.workflows !== undefined) {
    for (const versions of deployedByName("createEngine", options.workflows).values()) workflows.remember(versions);
  }
  return {
    db,
    appDb,
    tables,
    leaseMs,
    heartbeatMs,
    retentionMs,
    attemptTimeoutMs,
    maxPayloadBytes,
    telemetry,
    waiter,
    workflows,
    executorDeps: () => ({
      db,
      phaseDb: appDb,
      tables,
      heartbeatMs,
      hook: faultHookOf(engine()),
      silentHeartbeat: heartbeatSilenced(engine()),
      telemetry,
      maxPayloadBytes,
      rateLimits,
      unavailableRetryMs,
      retentionMs,
    }),
  };
}

/**
 * The lease a run of `def` takes, checked against the engine's heartbeat.
 *
 * @throws InvalidOptionError when the heartbeat is not below half of that lease.
 */
export function leaseFor(ctx: EngineContext, def: Definition): number {
  const runLease = def.options.leaseMs ?? ctx.leaseMs;
  checkHeartbeat(`workflow '${def.name}'`, ctx.heartbeatMs, runLease);
  return runLease;
}

/** SPEC: a key stays refused for 7 days after its record expired, unless the workflow says otherwise. */
const DEFAULT_TOMBSTONE_MS = 7 * 24 * 60 * 60 * 1000;

/** The tombstone time a new run of `def` is created with (workflow option `tombstoneMs`). */
export function tombstoneMsOf(def: Definition): number {
  return def.options.tombstoneMs ?? DEFAULT_TOMBSTONE_MS;
}

/** Attributes that name a run on spans: the key only as a hash. */
export function runAttributes(workflowName: string, tenantId: unknown, key: unknown) {
  return {
    "idempo.workflow": workflowName,
    ...(typeof tenantId === "string" ? { "idempo.tenant_id": tenantId } : {}),
    ...(typeof tenantId === "string" && typeof key === "string" ? { "idempo.key.hash": keyHash(tenantId, key) } : {}),
  };
}
