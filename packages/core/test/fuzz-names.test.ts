/**
 * Hostile workflow, phase and step names: a name the builder accepts must
 * survive storage, so that the run's retry replays and a takeover resumes
 * after its recovery point; a name it refuses is a WorkflowDefinitionError.
 *
 * The property runs 100 cases by default (IDEMPO_FUZZ_RUNS raises it) and
 * stops early after 3 s.
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, WorkflowDefinitionError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { describeError, fresh, RUNS, TIME_LIMIT_MS } from "./support/fuzz-runs.ts";
import { keyChar } from "./support/fuzz-values.ts";

const t = useTestDatabase();
let engine: Engine;
beforeAll(() => {
  engine = createEngine({ db: t.db, leaseMs: 60_000 });
});

describe("fuzzing workflow, phase and step names", () => {
  // Known failure: the builder accepts names holding a lone surrogate; PostgreSQL
  // stores them as U+FFFD, so the run's own retries no longer match its record.
  it("a name the builder accepts survives storage: a retry replays, and a takeover resumes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: keyChar, minLength: 1, maxLength: 12 }), async (name) => {
        let built: ReturnType<typeof nameProbe> | undefined;
        try {
          built = nameProbe(name);
        } catch (error) {
          expect(error, describeError(error)).toBeInstanceOf(WorkflowDefinitionError);
          return;
        }
        const [tenantId, key] = [fresh("tenant"), fresh("key")];
        // First attempt: the phase commits, the step fails; the retry must resume after the phase.
        built.failStep = true;
        await expect(engine.runOnce(built.wf, { tenantId, key, input: {} })).rejects.toThrow("step down");
        await engine.release(tenantId, key);
        built.failStep = false;
        const taken = await call2(built.wf, tenantId, key);
        expect(taken.error, `${JSON.stringify(name)}: ${describeError(taken.error)}`).toBeUndefined();
        const replay = await call2(built.wf, tenantId, key);
        expect(replay.error, `${JSON.stringify(name)}: ${describeError(replay.error)}`).toBeUndefined();
        expect(replay.result?.replayed).toBe(true);
      }),
      { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
  });
});

/** A two-item workflow whose workflow, phase and step are all called `name` (plus a suffix). */
function nameProbe(name: string) {
  const probe = {
    failStep: false,
    wf: workflow(name)
      .phase(name, () => ({ phased: true }))
      .step(`${name}!`, () => {
        if (probe.failStep) throw new Error("step down");
        return { stepped: true };
      })
      .respond(({ state }) => ({ status: 200, body: state })),
  };
  return probe;
}

async function call2(wf: ReturnType<typeof nameProbe>["wf"], tenantId: string, key: string) {
  try {
    return { result: await engine.runOnce(wf, { tenantId, key, input: {} }), error: undefined };
  } catch (error) {
    return { result: undefined, error };
  }
}
