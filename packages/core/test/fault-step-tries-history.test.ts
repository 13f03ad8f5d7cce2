/**
 * Fault of the kind "the history counts attempts, not calls": a step retried
 * in process (its `retries`) left one history entry for the attempt, so the
 * calls that failed before the one that succeeded, their errors and how long
 * each took, were nowhere to be seen. Every call is recorded with the write
 * the step makes anyway (its result or its failure), so a step that
 * succeeds at its first try costs no extra round trip.
 */
import { describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();

class Transient extends Error {}

function flaky(name: string, failures: number, retries: number) {
  let calls = 0;
  return workflow(name)
    .phase("prepare", () => ({ ready: true }))
    .step(
      "charge",
      () => {
        calls++;
        if (calls <= failures) throw new Transient(`provider 503 #${calls}`);
        return { charged: calls };
      },
      { retries, retryable: (e) => e instanceof Transient, backoffMs: 1, maxBackoffMs: 1 },
    )
    .respond(({ state }) => ({ status: 201, body: state }));
}

describe("a step's history shows every call", () => {
  it("failing twice then succeeding: one entry with three tries, each with its error and duration", async () => {
    const engine = createEngine({ db: t.db });
    expect(await engine.runOnce(flaky("tries_ok", 2, 3), { tenantId: "st", key: "ok", input: {} })).toMatchObject({
      status: 201,
      body: { charged: 3 },
    });
    const steps = (await engine.inspect("st", "ok"))?.history?.filter((h) => h.kind === "step") ?? [];
    expect(steps).toHaveLength(1);
    const [entry] = steps;
    expect(entry).toMatchObject({ name: "charge", outcome: "succeeded", error: null });
    expect(entry?.tries?.map((x) => x.error)).toEqual(["provider 503 #1", "provider 503 #2", null]);
    for (const x of entry?.tries ?? []) {
      expect(Number.isFinite(x.durationMs)).toBe(true);
      expect(x.durationMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("running out of tries: the failed entry lists every call", async () => {
    const engine = createEngine({ db: t.db });
    await rejectionOf(engine.runOnce(flaky("tries_out", 5, 1), { tenantId: "st", key: "out", input: {} }));
    const [entry] = (await engine.inspect("st", "out"))?.history?.filter((h) => h.kind === "step") ?? [];
    expect(entry).toMatchObject({ outcome: "failed", error: "provider 503 #2" });
    expect(entry?.tries?.map((x) => x.error)).toEqual(["provider 503 #1", "provider 503 #2"]);
  });

  it("a single call keeps its entry as it was: no tries list to store", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(flaky("tries_one", 0, 3), { tenantId: "st", key: "one", input: {} });
    const [entry] = (await engine.inspect("st", "one"))?.history?.filter((h) => h.kind === "step") ?? [];
    expect(entry).toMatchObject({ outcome: "succeeded", tries: null });
  });
});
