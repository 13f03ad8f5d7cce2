/**
 * Resuming due suspended runs once, without a worker: what `idempo resume`
 * does for runs whose sleep ended, whose awaited signal arrived or whose
 * wait timed out, and for enqueued runs, when no worker runs. Not part of
 * the supported API: `createEngine` hands {@link resumeDueRuns} over with its
 * other internals (`../engine-internals.ts`), and `@idempo/core/internal`
 * reaches it there as `resumeDue`.
 */
import { RESUME_STALE_OPTIONS } from "../../options/known-options.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions } from "../../options/option-shape.js";
import { selectDueRuns } from "../../store/due-runs.js";
import type { Definition, Workflow } from "../../workflow/definition.js";
import { deployedByName, prioritiesOf } from "../../workflow/versions.js";
import type { EngineContext } from "../engine-context.js";
import { executeDue } from "./execute-due.js";

/** Options of `resumeDue` (`@idempo/core/internal`). */
export interface ResumeDueOptions {
  /** The workflow definitions this process can run, as for `resumeStale`; runs of others are left alone. */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  readonly workflows: readonly Workflow<any, any>[];
  /** Most runs to resume in one call, 1-10 000 (Default: 100). */
  readonly limit?: number;
}

/**
 * What `resumeDue` (`@idempo/core/internal`) did, run by run. `resumed`
 * holds each run it took with the result of running it to its next stop: a
 * final response, or `outcome: 'suspended'` (status 202) when it reached
 * another sleep or wait. A run that another worker or a client took first
 * is in neither list.
 */
export interface DueReport {
  readonly resumed: readonly { tenantId: string; key: string; workflow: string; status: number; outcome: string }[];
  readonly failed: readonly { tenantId: string; key: string; workflow: string; error: Error }[];
}

/** The due runs of `options.workflows`, each executed once, in the order a worker would take them. */
export async function resumeDueRuns(ctx: EngineContext, options: ResumeDueOptions): Promise<DueReport> {
  // The same options as resumeStale's.
  checkOptions("resumeDue", RESUME_STALE_OPTIONS, options);
  const byName = deployedByName("resumeDue", options?.workflows);
  for (const versions of byName.values()) ctx.workflows.remember(versions);
  const limit = intOption("resumeDue", "limit", options.limit, 1, 10_000, 100);
  const resumed: DueReport["resumed"][number][] = [];
  const failed: DueReport["failed"][number][] = [];
  const names = [...byName.keys()];
  for (const due of await selectDueRuns(ctx.db, ctx.tables, names, limit, prioritiesOf(byName, names))) {
    const run = { tenantId: due.tenantId, key: due.key, workflow: due.workflow };
    try {
      const result = await executeDue(ctx, byName.get(due.workflow) as readonly Definition[], due.tenantId, due.key);
      if (result) resumed.push({ ...run, status: result.status, outcome: result.outcome });
    } catch (error) {
      failed.push({ ...run, error: error instanceof Error ? error : new Error(String(error)) });
    }
  }
  return { resumed, failed };
}
