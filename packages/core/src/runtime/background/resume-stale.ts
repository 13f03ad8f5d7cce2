/**
 * `engine.resumeStale`: find in-flight runs of the given workflows whose
 * lease expired, take each over with the statement a client retry uses (so
 * resumers and clients race safely), and run it from its recovery point.
 */
import { newId } from "../../ids.js";
import { RESUME_STALE_OPTIONS } from "../../options/known-options.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions } from "../../options/option-shape.js";
import { takeOverExpiredLease } from "../../store/claim.js";
import { selectStaleRuns } from "../../store/maintenance.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { Definition, Workflow } from "../../workflow/definition.js";
import { deployedByName } from "../../workflow/versions.js";
import type { EngineContext } from "../engine-context.js";
import { leaseFor, runAttributes } from "../engine-context.js";
import { unlessOverLimit } from "../execution/concurrency-slot.js";
import { DEFAULT_MAX_ATTEMPTS, reportParkedByTakeover, resumeTaken } from "../execution/resume.js";

/** Options of `resumeStale`. */
export interface ResumeStaleOptions {
  /**
   * The workflow definitions this process can run; runs of other workflows
   * are left alone. May hold several versions of one workflow: each run
   * resumes under its own version (see `WorkflowBuilder.version`).
   */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  workflows: readonly Workflow<any, any>[];
  /** Most runs to take over in one call (Default: 100). */
  limit?: number;
}

/**
 * What `resumeStale` did, run by run. A run that fails lands in `failed`
 * and never stops the others; a run whose attempts ran out is parked by its
 * takeover and lands in `parked` (it is not taken over again).
 */
export interface ResumeReport {
  readonly resumed: readonly { tenantId: string; key: string; workflow: string; status: number; outcome: string }[];
  readonly failed: readonly { tenantId: string; key: string; workflow: string; error: Error }[];
  readonly parked: readonly { tenantId: string; key: string; workflow: string; reason: string }[];
}

/** Take over and finish the stale runs of `opts.workflows`; see `Engine.resumeStale`. */
export async function resumeStale(ctx: EngineContext, opts: ResumeStaleOptions): Promise<ResumeReport> {
  checkOptions("resumeStale", RESUME_STALE_OPTIONS, opts);
  const { telemetry } = ctx;
  const byName = deployedByName("resumeStale", opts?.workflows);
  for (const versions of byName.values()) ctx.workflows.remember(versions);
  const limit = intOption("resumeStale", "limit", opts.limit, 1, 10_000, 100);
  const resumed: ResumeReport["resumed"][number][] = [];
  const failed: ResumeReport["failed"][number][] = [];
  const parked: ResumeReport["parked"][number][] = [];
  for (const stale of await selectStaleRuns(ctx.db, ctx.tables, [...byName.keys()], limit)) {
    const versions = byName.get(stale.workflow) as readonly Definition[];
    const def = versions[0] as Definition;
    const ownerToken = newId();
    try {
      const runLease = leaseFor(ctx, def);
      const res = await telemetry.span(
        `resume ${stale.workflow}`,
        "internal",
        () => runAttributes(stale.workflow, stale.tenantId, stale.key),
        async (span) => {
          const taken = await takeOverExpiredLease(ctx.db, ctx.tables, {
            ...stale,
            ownerToken,
            leaseMs: runLease,
            fingerprint: null,
            maxAttempts: def.options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
          });
          if (!taken) return null; // a client or another resumer got it first, or its owner renewed
          if (taken.kind === "parked") {
            span.set({ "idempo.claim.result": "parked" });
            reportParkedByTakeover(telemetry, { ...stale, workflow: def.name, reason: taken.reason });
            parked.push({ ...stale, reason: taken.reason });
            return null;
          }
          telemetry.count("claims", { "idempo.workflow": stale.workflow, "idempo.claim.result": "takeover" });
          span.set({ "idempo.claim.result": "takeover" });
          const own = { tenantId: stale.tenantId, key: stale.key, ownerToken };
          // Over its concurrency limit, the run was stepped aside (due): a worker or a retry takes it later.
          const result = await unlessOverLimit(
            resumeTaken(ctx, { deployed: versions, taken: taken.run, own, leaseMs: runLease, span, how: "takeover" }),
          );
          if (result) span.set({ "idempo.outcome": result.outcome, "idempo.replayed": false });
          return result;
        },
      );
      if (res) resumed.push({ ...stale, status: res.status, outcome: res.outcome });
    } catch (error) {
      telemetry.log(
        "error",
        {
          workflow: stale.workflow,
          tenantId: stale.tenantId,
          keyHash: keyHash(stale.tenantId, stale.key),
          error: String(error),
        },
        "idempo: resuming a stale run failed; it stays at its recovery point",
      );
      failed.push({ ...stale, error: error instanceof Error ? error : new Error(String(error)) });
    }
  }
  return { resumed, failed, parked };
}
