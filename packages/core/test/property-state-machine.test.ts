/**
 * The claim state machine under random interleavings, against real Postgres.
 *
 * Three attempts (and an operator) issue the store's own statements (claim,
 * reclaim after retention, takeover, renew, phase commit, complete, reject,
 * release, sweep) plus "time passes" (a lease or a retention period runs out),
 * in batches that run concurrently on separate connections. Every batch must
 * be explainable by some order of its commands applied to a small reference
 * model of SPEC's table: each command's result must be the model's, and the
 * row afterwards must be the model's row. On top of that:
 * - at most one attempt owns the key at any instant (the row's owner token is
 *   the model's single owner, and no two claims or takeovers both succeed);
 * - a completed record never changes (until its retention has run out);
 * - a refused call never changes a record, byte for byte;
 * - a phase's business write commits exactly when its fenced commit succeeds.
 *
 * 150 scenarios by default; IDEMPO_PROPERTY_RUNS=2000 runs more (the property
 * stops early at 25 s). A failure prints fast-check's seed and the shrunk
 * scenario, batch by batch, with what each statement returned.
 */
import fc from "fast-check";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Minted, Model } from "./support/claim-model.ts";
import { scenario, step } from "./support/claim-model.ts";
import { runScenario } from "./support/claim-scenario.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 8 });
const NUM_RUNS = Number(process.env.IDEMPO_PROPERTY_RUNS ?? 150);

describe("claim state machine: random interleavings against the reference model", () => {
  it(`holds for ${NUM_RUNS} random scenarios of concurrent claim, takeover, renew, commit, complete, reject, release, expire and sweep`, async () => {
    await sql`CREATE TABLE IF NOT EXISTS prop_effects (key text NOT NULL, token text NOT NULL)`.execute(t.db);
    await fc.assert(
      fc.asyncProperty(scenario, (batches) => runScenario(t.db, batches)),
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: 25_000, markInterruptAsFailure: false },
    );
  }, 300_000);

  it("the model itself: SPEC's rows for a claim on each key state", () => {
    const minted: Minted = { token: "t1", runId: "r1", state: "{}", body: "{}" };
    const empty: Model = { run: null, actors: [null, null, null], effects: 0 };
    const claimed = step(empty, { kind: "claim", actor: 0, payload: "p1" }, minted);
    expect(claimed.outcome).toEqual({ kind: "claimed" });
    // In flight, lease valid: 409 for the same payload, 422 for another (both "existing", nothing changes).
    const again = step(claimed.next, { kind: "claim", actor: 1, payload: "p2" }, { ...minted, token: "t2" });
    expect(again.outcome).toMatchObject({ kind: "existing", leaseValid: true, fingerprint: "fp-p1" });
    expect(again.next).toBe(claimed.next);
    // Lease expired: a takeover with another payload is refused; with the same one it wins.
    const expired = step(claimed.next, { kind: "expire" }, minted).next;
    expect(step(expired, { kind: "takeover", actor: 1, payload: "p2" }, minted).outcome).toEqual({
      kind: "bool",
      value: false,
    });
    const taken = step(expired, { kind: "takeover", actor: 1, payload: "p1" }, { ...minted, token: "t3" });
    expect(taken.outcome).toMatchObject({ kind: "taken", attempt: 2 });
    // The old owner is fenced out.
    expect(step(taken.next, { kind: "commit", actor: 0, phase: "a", last: false }, minted).outcome).toEqual({
      kind: "bool",
      value: false,
    });
  });
});
