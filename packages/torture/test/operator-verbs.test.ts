import { describe, expect, inject, it } from "vitest";
import { runOperatorScenario } from "../src/operator-scenario.ts";
import { Random } from "../src/random.ts";

/**
 * The operator scenario on its own (runTorture runs it after the fleet and
 * counts it in its report): poison runs and operator verbs (release,
 * cancel, retryFrom, unforced deletes) racing live owners leave no
 * duplicate effect and no lost intent, and every poison run ends parked.
 * Bounded by the number of intents and actions, not by time.
 */
describe("operator verbs racing live owners", () => {
  it("no duplicate effect, no lost intent, poison runs parked, and unforced deletes of live runs are refused", async () => {
    const seed = 1 + Math.floor(Math.random() * 2 ** 31);
    const log: string[] = [];
    const verdict = await runOperatorScenario({
      serverUrl: inject("serverUrl"),
      good: 30,
      poison: 4,
      actions: 150,
      leaseMs: 400,
      rng: new Random(seed),
      log: (line) => log.push(line),
    });
    console.log(`seed ${seed}:`, JSON.stringify({ ...verdict, problems: verdict.problems.slice(0, 10) }));
    expect(verdict.problems).toEqual([]);
    expect(verdict).toMatchObject({ intents: 34, duplicateEffects: 0, lostIntents: 0, otherViolations: 0 });
    // A poison run that did not end parked would be an other violation; forgotten keys are not checked.
    expect(verdict.parked + verdict.forgotten).toBeGreaterThanOrEqual(4);
    // The chaos really happened.
    expect(verdict.released + verdict.canceled + verdict.retriedFrom + verdict.refusedDeletes).toBeGreaterThan(0);
  }, 180_000);
});
