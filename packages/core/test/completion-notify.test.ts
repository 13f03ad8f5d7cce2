/**
 * The completion of a durable run (enqueued or once suspended) is announced
 * on the done channel by each statement function that can complete it: a
 * phase commit, a step result and a completion without a recovery point. A
 * plain request run announces nothing. Verdicts wait for a sentinel
 * notification sent after the run: PostgreSQL delivers a listener's
 * notifications in commit order, so everything committed before it has
 * arrived by then, however slow the machine.
 */
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { completionTag, DONE_CHANNEL } from "../src/store/notify-channels.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
let listener: pg.Client;
const heard: string[] = [];

beforeAll(async () => {
  listener = new pg.Client({ connectionString: t.url });
  await listener.connect();
  listener.on("notification", (n) => {
    if (n.channel === DONE_CHANNEL) heard.push(n.payload ?? "");
  });
  await listener.query(`LISTEN ${DONE_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
});

let sentinels = 0;

/** The tags announced since the last call, once a sentinel sent now came back. */
async function announcedSinceLast(): Promise<string[]> {
  const sentinel = `sentinel-${++sentinels}`;
  await sql`SELECT pg_notify(${DONE_CHANNEL}, ${sentinel})`.execute(t.db);
  await expect.poll(() => heard.includes(sentinel), { timeout: 120_000, interval: 10 }).toBe(true);
  const got = heard.splice(0, heard.length);
  return got.filter((tag) => !tag.startsWith("sentinel-"));
}

/** Run `wf` on `key` twice: the first attempt suspends on its zero-ms sleep, the second (the run is due) finishes it. */
async function durably(wf: Parameters<ReturnType<typeof createEngine>["runOnce"]>[0], key: string) {
  const engine = createEngine({ db: t.db });
  expect(await engine.runOnce(wf, { tenantId: "cn", key, input: {} })).toMatchObject({ status: 202 });
  await announcedSinceLast();
  return engine.runOnce(wf, { tenantId: "cn", key, input: {} });
}

describe("a durable run's completion is announced on the done channel", () => {
  it("by the phase commit that completes it", async () => {
    const wf = workflow("cn_phase")
      .sleep("nap", 0)
      .phase("last", () => ({ done: true }))
      .respond(() => ({ status: 200, body: { ok: true } }));
    expect(await durably(wf, "phase")).toMatchObject({ status: 200 });
    expect(await announcedSinceLast()).toEqual([completionTag("cn", "phase")]);
  });

  it("by the step result that completes it", async () => {
    const wf = workflow("cn_step")
      .sleep("nap", 0)
      .step("last", () => ({ done: true }))
      .respond(() => ({ status: 200, body: { ok: true } }));
    expect(await durably(wf, "step")).toMatchObject({ status: 200 });
    expect(await announcedSinceLast()).toEqual([completionTag("cn", "step")]);
  });

  it("by the completion without a recovery point (ctx.fail)", async () => {
    const wf = workflow("cn_fail")
      .sleep("nap", 0)
      .phase("declined", ({ fail }) => fail(402, { declined: true }))
      .respond(() => ({ status: 200, body: null }));
    expect(await durably(wf, "fail")).toMatchObject({ status: 402, outcome: "failed" });
    expect(await announcedSinceLast()).toEqual([completionTag("cn", "fail")]);
  });

  it("but not for a plain request run, on any of those paths", async () => {
    const engine = createEngine({ db: t.db });
    const phase = workflow("cn_plain_phase")
      .phase("last", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const step = workflow("cn_plain_step")
      .step("last", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const failing = workflow("cn_plain_fail")
      .phase("declined", ({ fail }) => fail(402, null))
      .respond(() => ({ status: 200, body: null }));
    expect(await engine.runOnce(phase, { tenantId: "cn", key: "p1", input: {} })).toMatchObject({ status: 200 });
    expect(await engine.runOnce(step, { tenantId: "cn", key: "p2", input: {} })).toMatchObject({ status: 200 });
    expect(await engine.runOnce(failing, { tenantId: "cn", key: "p3", input: {} })).toMatchObject({ status: 402 });
    expect(await announcedSinceLast()).toEqual([]);
  });
});
