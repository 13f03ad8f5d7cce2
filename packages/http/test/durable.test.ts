/**
 * Durable runs over HTTP, on each adapter: a workflow route whose run
 * suspends answers 202 with the accepted body, `Location` and
 * `Retry-After`; retries get 409 with the same hints until the run
 * completes, then its answer and replays. The webhook route verifies a
 * provider's signature over the raw body and turns the event into
 * `engine.signal`: 2xx for a delivered and for a duplicate signal, and for
 * one the run will never read; the problem table for the rest. Real servers on loopback, real PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import type { Engine } from "@idempo/core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { harnesses, runs, sign } from "./support/apps/durable-apps.ts";
import type { Sent } from "./support/client.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";
import type { RunningApp as App } from "./support/routes.ts";

const t = useTestDatabase();

const problemCode = (res: Sent) => (res.json as { code?: string } | undefined)?.code;
const retryAfter = (res: Sent) => Number(res.headers["retry-after"]);

describe.each(Object.keys(harnesses))("%s", (name) => {
  let app: App;
  beforeAll(async () => {
    app = await (harnesses[name] as (engine: Engine) => Promise<App>)(t.engine);
  });
  afterAll(async () => {
    await app?.close();
  });

  const post = (path: string, key: string, json: unknown) =>
    send(app.url, {
      path,
      headers: [
        ["Idempotency-Key", key],
        ["Authorization", "Bearer t1"],
      ],
      json,
    });
  /** A webhook as the provider sends it: these exact bytes, signed. */
  const deliver = (text: string, opts: { signature?: string; account?: string } = {}) =>
    send(app.url, {
      path: "/webhooks/psp",
      headers: [
        ["Content-Type", "application/json"],
        ["X-Psp-Signature", opts.signature ?? sign(text)],
        ...(opts.account ? [["X-Psp-Account", opts.account] as [string, string]] : []),
      ],
      body: text,
    });
  const confirmation = (key: string, data: unknown, name = "confirmed") =>
    // Odd spacing and key order on purpose: the signature covers these bytes, not a re-serialisation.
    `{"data": ${JSON.stringify(data)},   "type":"payment.confirmed","reference":${JSON.stringify(key)},"account":"t1","name":${JSON.stringify(name)}}`;
  const fresh = () => {
    const id = randomUUID().slice(0, 8);
    return { key: `k-${id}`, input: { orderId: `o-${name}-${id}`, amountCents: 4999 } };
  };

  it("a run waiting for 3-D Secure: 202 with the accepted body, Location and Retry-After; 409 until the webhook; then 201 once", async () => {
    const { key, input } = fresh();
    const first = await post("/payments", key, input);
    expect(first.status).toBe(202);
    expect(first.json).toEqual({
      orderId: input.orderId,
      status: "requires_confirmation",
      authorization: `au_${input.orderId}`,
    });
    expect(first.headers.location).toBe(`/runs/${key}`);
    // The wait's timeout is an hour away on the database clock.
    expect(retryAfter(first)).toBeGreaterThan(3000);
    expect(retryAfter(first)).toBeLessThanOrEqual(3600);
    expect(first.headers["idempotent-replayed"]).toBeUndefined();

    const retry = await post("/payments", key, input);
    expect({ status: retry.status, code: problemCode(retry) }).toEqual({ status: 409, code: "key_in_progress" });
    expect(retryAfter(retry)).toBeGreaterThan(3000);
    expect(retryAfter(retry)).toBeLessThanOrEqual(3600);
    expect(retry.headers.location).toBe(`/runs/${key}`);
    expect((await post("/payments", key, { ...input, amountCents: 1 })).status).toBe(422);

    const text = confirmation(key, { outcome: "approved" });
    const delivered = await deliver(text);
    expect(delivered.status).toBe(200);
    expect(delivered.json).toEqual({ received: true, duplicate: false, woke: true });
    // The provider retries the same event twice: it counts once, and each retry gets a 2xx.
    for (let i = 0; i < 2; i++) {
      const again = await deliver(text);
      expect(again.status).toBe(200);
      expect(again.json).toEqual({ received: true, duplicate: true, woke: false });
    }

    // Due now: the client's retry resumes it after the wait, captures and gets the final answer.
    const done = await post("/payments", key, input);
    expect(done.status).toBe(201);
    expect(done.json).toEqual({ orderId: input.orderId, capture: `cap_au_${input.orderId}`, outcome: "approved" });
    const replay = await post("/payments", key, input);
    expect(replay.status).toBe(201);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.sha256).toBe(done.sha256);
    expect({ authorize: runs(`authorize:${input.orderId}`), capture: runs(`capture:${input.orderId}`) }).toEqual({
      authorize: 1,
      capture: 1,
    });
    expect((await t.engine.inspect("t1", key))?.state).toMatchObject({ confirmed: { outcome: "approved" } });
    // A late duplicate after completion still gets a 2xx; a different payload does not.
    expect((await deliver(text)).json).toMatchObject({ duplicate: true });
    const conflicting = await deliver(confirmation(key, { outcome: "declined" }));
    expect({ status: conflicting.status, code: problemCode(conflicting) }).toEqual({
      status: 422,
      code: "key_mismatch",
    });
  });

  it("waitInFlightMs: a retry of a suspended run waits for the webhook and answers with the final response", async () => {
    const { key, input } = fresh();
    expect((await post("/payments-wait", key, input)).status).toBe(202);
    const waiting = post("/payments-wait", key, input);
    // Give the retry a moment to start waiting (on a slow machine it may come after the signal
    // instead: it then resumes the due run at once, and the answer is the same).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");
    expect((await deliver(confirmation(key, { outcome: "approved" }))).status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({ outcome: "approved" });
    expect(runs(`capture:${input.orderId}`)).toBe(1);
  });

  it("a sleep: Retry-After points at its wake-up time, on the 202 and on the 409", async () => {
    const { key, input } = fresh();
    const first = await post("/cool-off", key, input);
    expect(first.status).toBe(202);
    expect(first.json).toBeNull();
    expect(retryAfter(first)).toBeGreaterThan(3000);
    expect(retryAfter(first)).toBeLessThanOrEqual(3600);
    const retry = await post("/cool-off", key, input);
    expect(retry.status).toBe(409);
    expect(retryAfter(retry)).toBeGreaterThan(3000);
    expect(retryAfter(retry)).toBeLessThanOrEqual(3600);
    const record = await t.engine.inspect("t1", key);
    expect(record?.waitingFor).toMatchObject({ kind: "sleep", name: "cool_off" });
  });

  it("a wait with no timeout: Retry-After is the lease length, on the 202 and on the 409", async () => {
    const { key, input } = fresh();
    const first = await post("/open", key, input);
    expect(first.status).toBe(202);
    // The engine's lease in these tests is 3 s.
    expect(first.headers["retry-after"]).toBe("3");
    const retry = await post("/open", key, input);
    expect(retry.status).toBe(409);
    expect(retry.headers["retry-after"]).toBe("3");
    expect((await deliver(confirmation(key, "now", "go"))).status).toBe(200);
    const done = await post("/open", key, input);
    expect({ status: done.status, json: done.json }).toEqual({
      status: 200,
      json: { orderId: input.orderId, go: "now" },
    });
  });

  it("the webhook refuses what it cannot verify, and maps idempo's errors to statuses", async () => {
    const { key, input } = fresh();
    expect((await post("/payments", key, input)).status).toBe(202);
    const text = confirmation(key, { outcome: "approved" });

    const forged = await deliver(text, { signature: sign(`${text} `) });
    expect({ status: forged.status, code: problemCode(forged) }).toEqual({ status: 401, code: "webhook_unverified" });
    const unsigned = await send(app.url, {
      path: "/webhooks/psp",
      headers: [["Content-Type", "application/json"]],
      body: text,
    });
    expect(unsigned.status).toBe(401);
    const blocked = await deliver(text, { account: "blocked" });
    expect({ status: blocked.status, code: problemCode(blocked) }).toEqual({ status: 403, code: "webhook_forbidden" });
    // Nothing refused reached the run.
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");
    expect((await post("/payments", key, input)).status).toBe(409);

    const unknown = await deliver(confirmation(`absent-${key}`, { outcome: "approved" }));
    expect({ status: unknown.status, code: problemCode(unknown) }).toEqual({ status: 404, code: "run_not_found" });
    const wrongName = await deliver(confirmation(key, { outcome: "approved" }, "refunded"));
    expect({ status: wrongName.status, code: problemCode(wrongName) }).toEqual({ status: 400, code: "invalid_input" });
    const badPayload = await deliver(confirmation(key, { outcome: "maybe" }));
    expect({ status: badPayload.status, code: problemCode(badPayload) }).toEqual({
      status: 400,
      code: "invalid_input",
    });
    const garbled = await deliver('{"type": "payment.confirmed", ');
    expect({ status: garbled.status, code: problemCode(garbled) }).toEqual({ status: 400, code: "invalid_body" });
    const huge = await deliver(JSON.stringify({ type: "ping", pad: "x".repeat(2048) }));
    expect({ status: huge.status, code: problemCode(huge) }).toEqual({ status: 413, code: "request_too_large" });
    const ping = await deliver(JSON.stringify({ type: "ping" }));
    expect({ status: ping.status, json: ping.json }).toEqual({ status: 200, json: { received: true, ignored: true } });
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");

    expect((await deliver(text)).json).toEqual({ received: true, duplicate: false, woke: true });
  });

  it("a signal for a run that completed without it is acknowledged as run_ended, so the provider stops retrying", async () => {
    const { key, input } = fresh();
    expect((await post("/expiring", key, input)).status).toBe(202);
    // Its timeout has passed: the retry resumes it, and the wait ends with the stored 408.
    const timedOut = await post("/expiring", key, input);
    expect({ status: timedOut.status, code: problemCode(timedOut) }).toEqual({ status: 408, code: "wait_timeout" });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      const late = await deliver(confirmation(key, { outcome: "approved" }));
      expect({ status: late.status, json: late.json }).toEqual({
        status: 200,
        json: { received: true, duplicate: false, woke: false, undelivered: "run_ended" },
      });
      // No onUndelivered here: the default reports it as a warning.
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });
});
