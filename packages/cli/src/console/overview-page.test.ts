/**
 * The overview and schedules routes without a database or a browser: an
 * engine that answers fixed figures. They need the start-up token as every
 * page does, show stored names with invisible and bidirectional characters
 * escaped (and markup as text), and pause a schedule only from a form that
 * carries the token, only when actions are allowed.
 */
import type { Engine, Overview, ScheduleRecord, ScheduleTicks } from "@idempo/core";
import { describe, expect, it } from "vitest";
import type { ConsoleContext } from "./app.js";
import { consoleApp } from "./app.js";
import { allowedHosts } from "./hosts.js";

const NOW = new Date("2026-12-02T10:30:20Z");
const TOKEN = "t0ken";
const COOKIE = "idempo_console_4300";
const zeros = (n: number) => new Array<number>(n).fill(0);
const at = (n: number, value: number) => zeros(60).map((_, i) => (i === n ? value : 0));

const overview: Overview = {
  window: "hour",
  now: NOW,
  buckets: zeros(60).map((_, i) => new Date(Date.parse("2026-12-02T09:31:00Z") + i * 60_000)),
  bucketMs: 60_000,
  started: at(50, 5),
  finished: { succeeded: at(50, 3), failed: at(51, 1), errored: zeros(60), canceled: zeros(60) },
  parked: zeros(60).map((_, i) => (i >= 40 ? 1 : 0)),
  stuck: zeros(60),
  outboxBacklog: zeros(60),
  current: { inFlight: 0, stuck: 0, parked: 1, suspended: 0, outboxPending: 0, outboxDead: 0 },
  workflowDurations: [{ workflow: "pay\u202Egnp", count: 3, p50Ms: 200, p95Ms: 290, maxMs: 300 }],
  itemDurations: [
    {
      workflow: "pay\u202Egnp",
      kind: "step",
      name: "<b>charge</b>",
      count: 3,
      p50Ms: 20,
      p95Ms: 29,
      maxMs: 30,
      failed: 1,
    },
  ],
};

function schedule(paused: boolean): ScheduleRecord {
  return {
    name: "nightly",
    tenantId: "acme\u200B",
    workflow: "report",
    cron: "0 2 * * *",
    timezone: "UTC",
    catchUp: "latest",
    graceMs: 60_000,
    hasInput: false,
    paused,
    nextTickAt: new Date("2026-12-03T02:00:00Z"),
    lastTickAt: null,
    lastFiredAt: null,
    lastError: null,
    createdAt: new Date("2026-11-01T00:00:00Z"),
    updatedAt: new Date("2026-11-01T00:00:00Z"),
  };
}

/** An engine that answers the pages' reads with the figures above, and counts pauses. */
function fakeEngine(state: { paused: boolean; pauses: number }): Engine {
  const ticks = (): ScheduleTicks[] => [
    {
      schedule: schedule(state.paused),
      next: state.paused ? [] : [new Date("2026-12-03T02:00:00Z")],
      last: [{ at: new Date("2026-12-02T02:00:00Z"), key: "schedule:nightly:2026-12-02T02:00:00.000Z", run: null }],
    },
  ];
  const engine: Partial<Engine> = {
    overview: async () => overview,
    listScheduleTicks: async () => ticks(),
    listSchedules: async () => ticks().map((t) => t.schedule),
    pauseSchedule: async () => {
      state.pauses++;
      state.paused = true;
      return schedule(true);
    },
  };
  return engine as Engine;
}

function app(actions: boolean, state = { paused: false, pauses: 0 }) {
  const ctx: ConsoleContext = {
    engine: fakeEngine(state),
    clock: async () => NOW,
    signals: async () => new Map(),
    actions,
    report: (error) => {
      throw error;
    },
  };
  const a = consoleApp(ctx, { token: TOKEN, cookie: COOKIE, hosts: allowedHosts("127.0.0.1", 4300) });
  const request = (path: string, init: RequestInit & { cookie?: boolean } = {}) =>
    a.request(`http://127.0.0.1:4300${path}`, {
      ...init,
      headers: { host: "127.0.0.1:4300", ...(init.cookie === false ? {} : { cookie: `${COOKIE}=${TOKEN}` }) },
    });
  return { request, state };
}

describe("the overview and schedules pages", () => {
  it("need the start-up token", async () => {
    const { request } = app(false);
    for (const path of ["/overview", "/overview?window=day", "/schedules"]) {
      const res = await request(path, { cookie: false });
      expect(res.status, path).toBe(401);
      expect(await res.text()).toContain("Token needed");
    }
  });

  it("show the engine's figures, with stored names escaped and markup as text", async () => {
    const { request } = app(false);
    const body = await (await request("/overview")).text();
    expect(body).toMatch(/data-tile="started"><a [^>]*><small>[^<]*<\/small><strong data-value>5<\/strong>/);
    expect(body).toMatch(/data-tile="failed"><a [^>]*><small>failed<\/small><strong data-value>1<\/strong>/);
    expect(body).toContain(`data-series="succeeded" data-values="${at(50, 3).join(",")}`);
    expect(body).toContain("pay\\u202Egnp");
    expect(body).toContain("&lt;b&gt;charge&lt;/b&gt;");
    expect(body).toContain("p50 20ms · p95 29ms · 3× · 1 failed");
    expect(body).not.toMatch(/[\u202E\u200B]|<b>/);
    const schedules = await (await request("/schedules")).text();
    expect(schedules).toContain("tenant acme\\u200B");
    expect(schedules).toContain('data-run="none"');
    expect(schedules).not.toMatch(/[\u202E\u200B]/);
    expect(schedules).not.toContain("Pause…");
  });

  it("pause: absent without --allow-actions; with it, only from a form that carries the token, once", async () => {
    const readOnly = app(false);
    expect((await readOnly.request("/actions/schedule-pause/nightly")).status).toBe(404);
    const post = (a: ReturnType<typeof app>, token?: string) =>
      a.request("/actions/schedule-pause/nightly", {
        method: "POST",
        body: new URLSearchParams(token === undefined ? {} : { token }),
      });
    expect((await post(readOnly, TOKEN)).status).toBe(404);
    const acting = app(true);
    expect(await (await acting.request("/schedules")).text()).toContain("Pause…");
    expect(await (await acting.request("/actions/schedule-pause/nightly")).text()).toContain(
      "the ticks of the pause are skipped",
    );
    expect((await post(acting)).status).toBe(403);
    expect((await post(acting, "guess")).status).toBe(403);
    expect(acting.state.pauses).toBe(0);
    const done = await post(acting, TOKEN);
    expect([done.status, done.headers.get("location")]).toEqual([303, "/schedules?done=schedule-pause"]);
    expect((await post(acting, TOKEN)).status).toBe(409);
    expect(acting.state.pauses).toBe(1);
    expect((await acting.request("/actions/schedule-pause/absent")).status).toBe(404);
  });
});
