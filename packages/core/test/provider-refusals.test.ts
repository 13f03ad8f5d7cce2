/**
 * Field fault of the kind "key derivation (in-process retries, provider
 * conflict answers, volatile params)" (BR-34): a provider's definitive
 * refusal inside a step reached the caller as the SDK's own error with
 * nothing naming the step, and a provider's "idempotency key in use"
 * conflict (a same-key call still being processed: "try later") could be
 * stored as the run's final answer. The caller still gets the SDK's own
 * error object (its `instanceof` checks keep working); `stepFailureOf`
 * names the step, and an error the step's `retryable` accepts is never
 * final.
 */
import { describe, expect, it } from "vitest";
import { createEngine, deriveStepKey, RunParkedError, stepFailureOf, workflow } from "../src/index.ts";
import { rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const LEASE_MS = 300;

/** The error class of a Stripe-like SDK: an HTTP status and a provider code. */
class ProviderError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ProviderError";
  }
}

/**
 * A payments provider with Stripe's idempotent-request rules: one charge per
 * key, 400 for the same key with other params, and 409
 * `idempotency_key_in_use` while a same-key request is still being
 * processed (here: for the next `busyFor` calls of a key). Every request is
 * recorded with the key it carried, as a wire recorder would.
 */
class Provider {
  readonly wire: { key: string; params: string; answer: number }[] = [];
  readonly #charges = new Map<string, { params: string; id: string }>();
  readonly #busy = new Map<string, number>();

  /** The next `calls` requests with `key` meet a same-key request still in progress. */
  busyFor(key: string, calls: number): void {
    this.#busy.set(key, calls);
  }

  charge(params: object, key: string): { id: string } {
    const text = JSON.stringify(params);
    const busy = this.#busy.get(key) ?? 0;
    if (busy > 0) {
      this.#busy.set(key, busy - 1);
      this.wire.push({ key, params: text, answer: 409 });
      throw new ProviderError(
        409,
        "idempotency_key_in_use",
        "There is currently another in-progress request using this idempotency key",
      );
    }
    const seen = this.#charges.get(key);
    if (seen && seen.params !== text) {
      this.wire.push({ key, params: text, answer: 400 });
      throw new ProviderError(
        400,
        "idempotency_key_mismatch",
        "Keys for idempotent requests can only be used with the same parameters they were first used with",
      );
    }
    this.wire.push({ key, params: text, answer: 200 });
    if (seen) return { id: seen.id };
    const id = `ch_${this.#charges.size + 1}`;
    this.#charges.set(key, { params: text, id });
    return { id };
  }

  get charges(): number {
    return this.#charges.size;
  }
}

/** The documented `retryable` for a payments SDK: timeouts, 5xx, and the provider's in-use conflict. */
const retryable = (e: unknown) =>
  (e instanceof Error && e.name === "TimeoutError") ||
  (e instanceof ProviderError && (e.status >= 500 || e.code === "idempotency_key_in_use"));

function checkout(provider: Provider, params: (input: { cents: number }) => object, options = {}) {
  return workflow("br34_checkout", { maxAttempts: 2, ...options })
    .phase("create_order", () => ({ orderId: "o_1" }))
    .step(
      "charge",
      ({ input, idempotencyKey }) => ({
        chargeId: provider.charge(params(input as { cents: number }), idempotencyKey).id,
      }),
      {
        retries: 3,
        retryable,
        backoffMs: 1,
      },
    )
    .respond(({ state }) => ({ status: 201, body: state }));
}

describe("a provider's answers inside a step (BR-34)", () => {
  it("a definitive refusal reaches the caller as the provider's own error, names the step, is not retried in process, and parks after maxAttempts", async () => {
    const provider = new Provider();
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    let cents = 100;
    const wf = checkout(provider, () => ({ amount: cents }));
    // A first attempt charges with one set of params and crashes before recording it...
    const first = workflow("br34_checkout", { maxAttempts: 2 })
      .phase("create_order", () => ({ orderId: "o_1" }))
      .step("charge", ({ idempotencyKey }) => {
        provider.charge({ amount: cents }, idempotencyKey);
        throw new Error("process died before the result was recorded");
      })
      .respond(() => ({ status: 201, body: null }));
    await rejectionOf(engine.runOnce(first, { tenantId: "t1", key: "k4", input: { cents: 1 } }));
    await engine.release("t1", "k4");
    // ...and the takeover sends different params under the same derived key: a definitive 400.
    cents = 250;
    const error = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "k4", input: { cents: 1 } }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(400);
    expect(error.message).toMatch(/same parameters/);
    expect(stepFailureOf(error)).toEqual({
      workflow: "br34_checkout",
      step: "charge",
      tenantId: "t1",
      key: "k4",
      attempt: 2,
      tries: 1,
      retryable: false,
    });
    // The context is invisible to code that serialises or spreads the error.
    expect(Object.keys(error)).not.toContain("idempoStep");
    expect(JSON.stringify(error)).not.toContain("charge");
    // Not retried in process: the wire shows one charge call per attempt, each with the same key.
    expect(provider.wire.map((w) => w.answer)).toEqual([200, 400]);
    expect(new Set(provider.wire.map((w) => w.key)).size).toBe(1);
    const rec = await engine.inspect("t1", "k4");
    expect(rec).toMatchObject({ status: "in_flight", recoveryPoint: "create_order" });
    expect(rec?.history?.at(-1)).toMatchObject({ kind: "step", name: "charge", outcome: "failed" });
    // Not retried forever: the next takeover would start attempt 3 of 2, so it parks the run.
    await engine.release("t1", "k4");
    expect(await engine.resumeStale({ workflows: [wf] })).toMatchObject({ resumed: [], failed: [] });
    expect(await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "k4", input: { cents: 1 } }))).toBeInstanceOf(
      RunParkedError,
    );
    expect(provider.charges).toBe(1);
  });

  it("idempotency_key_in_use is retried in process with the same key, and the step's result is the one charge", async () => {
    const provider = new Provider();
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const wf = checkout(provider, (input) => ({ amount: input.cents }), { onUnknownError: "store" });
    provider.busyFor(derivedKey("k2"), 2);
    const res = await engine.runOnce(wf, { tenantId: "t1", key: "k2", input: { cents: 100 } });
    expect(res).toMatchObject({ status: 201, body: { chargeId: "ch_1" }, outcome: "succeeded" });
    expect(provider.wire.map((w) => w.answer)).toEqual([409, 409, 200]);
    expect(new Set(provider.wire.map((w) => w.key)).size).toBe(1);
    expect(provider.charges).toBe(1);
  });

  it("an in-use conflict that outlasts the retries is never stored as the run's answer, even under onUnknownError 'store'", async () => {
    const provider = new Provider();
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const wf = checkout(provider, (input) => ({ amount: input.cents }), { onUnknownError: "store" });
    provider.busyFor(derivedKey("k2b"), 4);
    const error = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "k2b", input: { cents: 100 } }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe("idempotency_key_in_use");
    expect(stepFailureOf(error)).toMatchObject({ step: "charge", attempt: 1, tries: 4, retryable: true });
    // Still in flight at its recovery point, not completed with a stored 500.
    expect(await engine.inspect("t1", "k2b")).toMatchObject({
      status: "in_flight",
      recoveryPoint: "create_order",
      response: null,
    });
    // Once the first request has finished, the next attempt gets the one charge.
    await engine.release("t1", "k2b");
    const res = await engine.runOnce(wf, { tenantId: "t1", key: "k2b", input: { cents: 100 } });
    expect(res).toMatchObject({ status: 201, body: { chargeId: "ch_1" }, replayed: false });
    expect(provider.wire.map((w) => w.answer)).toEqual([409, 409, 409, 409, 200]);
    expect(provider.charges).toBe(1);
  });

  it("an error the step does not mark retryable is still stored under onUnknownError 'store' (the control)", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    let calls = 0;
    const wf = workflow("br34_store", { onUnknownError: "store" })
      .step(
        "charge",
        () => {
          calls++;
          throw new ProviderError(402, "card_declined", "Your card was declined");
        },
        { retries: 3, retryable, backoffMs: 1 },
      )
      .respond(() => ({ status: 201, body: null }));
    const res = await engine.runOnce(wf, { tenantId: "t1", key: "k5", input: {} });
    expect(res).toMatchObject({ status: 500, outcome: "errored" });
    expect(calls).toBe(1);
    expect(await engine.inspect("t1", "k5")).toMatchObject({ status: "completed" });
  });
});

/** The derived key the run of `key` sends from its `charge` step. */
const derivedKey = (key: string) => deriveStepKey("t1", key, "br34_checkout", "charge");
