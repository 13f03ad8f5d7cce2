/**
 * Fault of the kind "a wrapped handler that never settles holds its key for
 * good": its heartbeat renewed the lease forever and every retry got 409.
 * The attempt bound (`attemptTimeoutMs`, one minute by default for wrapped
 * handlers) makes the key takeable again.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

describe("wrapped handlers have a bound", () => {
  it("Express: a handler that never answers gives its key up at attemptTimeoutMs; the retry runs and is stored", async () => {
    let calls = 0;
    const app = express();
    app.post("/never", ex.idempotency(t.engine, { tenant: () => "t1", attemptTimeoutMs: 1_500 }), (_req, res) => {
      calls++;
      if (calls > 1) res.status(201).json({ call: calls });
      // The first call never answers.
    });
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(
      () =>
        new Promise((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const key = `k-${crypto.randomUUID()}`;
    const headers = [["Idempotency-Key", key]] as const;
    void send(url, { path: "/never", headers, json: { a: 1 } }).catch(() => undefined);
    for (let i = 0; i < 400 && calls === 0; i++) await new Promise((r) => setTimeout(r, 25));
    // Poll until the bound has passed and the key is free again (no wall-clock verdict). The bound is
    // long enough that the retry's own call, on a loaded machine, still answers within it.
    let answer = await send(url, { path: "/never", headers, json: { a: 1 } });
    for (let i = 0; i < 1_000 && answer.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 50));
      answer = await send(url, { path: "/never", headers, json: { a: 1 } });
    }
    expect(answer.status).toBe(201);
    expect(answer.json).toEqual({ call: 2 });
    const replay = await send(url, { path: "/never", headers, json: { a: 1 } });
    expect(replay.headers).toMatchObject({ "idempotent-replayed": "true" });
    expect(calls).toBe(2);
  });

  it("a bound outside 1 to 2 147 483 647 ms is refused when the middleware is made", () => {
    for (const bad of [0, -5, 2 ** 31]) {
      expect(() => ex.idempotency(t.engine, { tenant: () => "t1", attemptTimeoutMs: bad })).toThrow(/attemptTimeoutMs/);
    }
  });
});
