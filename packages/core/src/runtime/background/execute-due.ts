/**
 * One due run (enqueued, woken from a sleep, signalled or timed out) taken
 * and run to its next stop: what a worker does for each run it selects, and
 * what `idempo resume` does for each due run when no worker runs.
 */
import { newId } from "../../ids.js";
import { takeDueRun } from "../../store/due-runs.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { Definition } from "../../workflow/definition.js";
import type { EngineContext } from "../engine-context.js";
import { leaseFor, runAttributes } from "../engine-context.js";
import { unlessOverLimit } from "../execution/concurrency-slot.js";
import { resumeTaken } from "../execution/resume.js";
import type { RunResult } from "../execution/run-result.js";

/**
 * Take the due run `(tenantId, key)` and run it from its recovery point;
 * null when another worker or a client retry took it first, or when it is
 * over its concurrency limit (it waits, due, for a free slot). `deployed` are
 * the versions of its workflow this process knows, newest first.
 */
export async function executeDue(
  ctx: EngineContext,
  deployed: readonly Definition[],
  tenantId: string,
  key: string,
): Promise<RunResult<unknown> | null> {
  const { telemetry } = ctx;
  const def = deployed[0] as Definition;
  const runLease = leaseFor(ctx, def);
  const ownerToken = newId();
  const attributes = () => runAttributes(def.name, tenantId, key);
  return telemetry.span(`resume ${def.name}`, "internal", attributes, async (span) => {
    const taken = await takeDueRun(ctx.db, ctx.tables, {
      tenantId,
      key,
      ownerToken,
      leaseMs: runLease,
      fingerprint: null,
    });
    if (!taken) return null; // another worker or a client retry got it first
    telemetry.count("claims", { "idempo.workflow": def.name, "idempo.claim.result": "resume" });
    span.set({ "idempo.claim.result": "resume" });
    try {
      const own = { tenantId, key, ownerToken };
      // Over its concurrency limit, the run was stepped aside: a later round takes it when a slot frees.
      const result = await unlessOverLimit(
        resumeTaken(ctx, { deployed, taken, own, leaseMs: runLease, span, how: "due" }),
      );
      if (result) span.set({ "idempo.outcome": result.outcome, "idempo.replayed": false });
      return result;
    } catch (error) {
      telemetry.log(
        "error",
        { workflow: def.name, tenantId, keyHash: keyHash(tenantId, key), error: String(error) },
        "idempo: running a due run failed; it stays at its recovery point",
      );
      throw error;
    }
  });
}
