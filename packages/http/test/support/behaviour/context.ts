/**
 * What every group of the behaviour suite shares: this file's database and
 * engine, the adapter's app started on loopback for the file, the handlers'
 * effects, and the helpers that send a request, count rows and check an
 * answer (a problem, a replay).
 */
import { randomUUID } from "node:crypto";
import type { RunRecord } from "@idempo/core";
import { sql } from "kysely";
import { afterAll, beforeAll, expect } from "vitest";
import type { Request, Sent } from "../client.ts";
import { send } from "../client.ts";
import { useTestDatabase } from "../database.ts";
import { Effects } from "../effects.ts";
import type { Harness, RunningApp } from "../routes.ts";

export type Header = readonly [string, string];

export const MIB = 1024 * 1024;
/** The default request limit of both modes on every adapter (docs/http.md). */
export const DEFAULT_REQUEST_LIMIT = 4 * MIB;
/** The limit the `/wrapped/small` and `/refunds/small` routes set with `maxRequestBytes`. */
export const SMALL_LIMIT = 64 * 1024;

/** The shared state and helpers of one adapter's run of the suite; the app starts before its first test. */
export function useBehaviourContext(harness: Harness) {
  const t = useTestDatabase();
  const effects = new Effects();
  let running: RunningApp;
  /** The running app, read when a test sends a request. */
  const app = {
    get url() {
      return running.url;
    },
  };

  beforeAll(async () => {
    running = await harness.start({ engine: t.engine, db: t.db, effects });
  });
  afterAll(async () => {
    await running?.close();
  });

  const uid = () => randomUUID().slice(0, 13);
  const newKey = () => `k-${uid()}`;
  const auth = (token = "t1-a"): Header => ["Authorization", `Bearer ${token}`];
  const call = (req: Request) => send(app.url, req);
  const post = (
    path: string,
    key: string | undefined,
    json: unknown,
    opts: { token?: string; headers?: Header[] } = {},
  ) =>
    call({
      path,
      headers: [
        auth(opts.token),
        ...(key === undefined ? [] : [["Idempotency-Key", key] as Header]),
        ...(opts.headers ?? []),
      ],
      json,
    });
  const totalRows = async () =>
    Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs`.execute(t.db)).rows[0]?.n);
  const rowsFor = async (key: string) =>
    Number(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${key}`.execute(t.db)).rows[0]
        ?.n,
    );
  const ordersFor = async (cartId: string) =>
    Number(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE cart_id = ${cartId}`.execute(t.db)).rows[0]
        ?.n,
    );
  /** The parts of a record a refused request must never change. */
  const snapshot = async (tenant: string, key: string) => {
    const r = (await t.engine.inspect(tenant, key)) as RunRecord;
    return {
      runId: r.runId,
      workflow: r.workflow,
      status: r.status,
      ownerToken: r.ownerToken,
      attempt: r.attempt,
      recoveryPoint: r.recoveryPoint,
      input: r.input,
      response: r.response,
      expiresAt: r.expiresAt,
    };
  };

  const expectProblem = (res: Sent, status: number, code: string) => {
    expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status, code });
    expect(res.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(res.json).toMatchObject({ type: `urn:idempo:problem:${code}`, status, code });
  };
  const expectReplay = (first: Sent, again: Sent) => {
    expect(again.status).toBe(first.status);
    expect(again.sha256).toBe(first.sha256);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
  };
  return {
    t,
    effects,
    app,
    uid,
    newKey,
    auth,
    call,
    post,
    totalRows,
    rowsFor,
    ordersFor,
    snapshot,
    expectProblem,
    expectReplay,
  };
}

export type BehaviourContext = ReturnType<typeof useBehaviourContext>;
