import { describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();

class Transient extends Error {}

describe("step retries and timeouts", () => {
  it("retries errors the step marks retryable, with the same derived key each time", async () => {
    const keys: string[] = [];
    const wf = workflow("flaky_provider")
      .step(
        "charge",
        ({ idempotencyKey }) => {
          keys.push(idempotencyKey);
          if (keys.length < 3) throw new Transient("503");
          return { chargeId: "ch_1" };
        },
        { retries: 3, retryable: (e) => e instanceof Transient, backoffMs: 1 },
      )
      .respond(({ state }) => ({ status: 201, body: state }));
    const res = await createEngine({ db: t.db }).runOnce(wf, { tenantId: "so", key: "k1", input: {} });
    expect(res.body).toEqual({ chargeId: "ch_1" });
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
  });

  it("does not retry other errors, and gives up after `retries`", async () => {
    let calls = 0;
    const wf = workflow("broken_provider")
      .step(
        "charge",
        () => {
          calls++;
          throw calls === 1 ? new Transient("503") : new Error("400 bad request");
        },
        { retries: 5, retryable: (e) => e instanceof Transient, backoffMs: 1 },
      )
      .respond(() => ({ status: 201, body: {} }));
    await expect(createEngine({ db: t.db }).runOnce(wf, { tenantId: "so", key: "k2", input: {} })).rejects.toThrow(
      "400 bad request",
    );
    expect(calls).toBe(2);

    let always = 0;
    const down = workflow("down_provider")
      .step(
        "charge",
        () => {
          always++;
          throw new Transient("503");
        },
        { retries: 2, retryable: () => true, backoffMs: 1 },
      )
      .respond(() => ({ status: 201, body: {} }));
    await expect(createEngine({ db: t.db }).runOnce(down, { tenantId: "so", key: "k3", input: {} })).rejects.toThrow(
      "503",
    );
    expect(always).toBe(3);
  });

  it("timeoutMs aborts the step's signal", async () => {
    let abortedAfter = -1;
    const wf = workflow("slow_provider")
      .step(
        "charge",
        ({ signal }) =>
          new Promise((_, reject) => {
            const started = Date.now();
            signal.addEventListener("abort", () => {
              abortedAfter = Date.now() - started;
              reject(signal.reason);
            });
          }),
        { timeoutMs: 100 },
      )
      .respond(() => ({ status: 201, body: {} }));
    await expect(createEngine({ db: t.db }).runOnce(wf, { tenantId: "so", key: "k4", input: {} })).rejects.toThrow();
    // Only the abort settles the step, so reaching this line proves it fired; timers never fire early.
    expect(abortedAfter).toBeGreaterThanOrEqual(90);
  });
});
