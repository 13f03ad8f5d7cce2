import type { HistoryEntry } from "@idempo/core";
import { expect, it } from "vitest";
import { painter } from "./colour.js";
import { timelineTable } from "./timeline.js";

const now = new Date("2026-12-01T10:00:00Z");

it("a discarded signal shows as such, with the schema's issues, and the wait it left open as waiting", () => {
  const history: HistoryEntry[] = [
    {
      kind: "wait",
      name: "three_ds",
      branch: null,
      attempt: 1,
      derivedKey: null,
      outcome: "discarded",
      error: "signal_discarded: $.outcome: Invalid option",
      startedAt: new Date(now.getTime() - 2_000),
      finishedAt: new Date(now.getTime() - 2_000),
      tries: null,
    },
    {
      kind: "wait",
      name: "three_ds",
      branch: null,
      attempt: 1,
      derivedKey: null,
      outcome: "started",
      error: null,
      startedAt: new Date(now.getTime() - 1_000),
      finishedAt: null,
      tries: null,
    },
  ];
  const text = timelineTable(history, now, false, painter(false), 200, true);
  expect(text).toContain("signal discarded");
  expect(text).toContain("error: signal_discarded: $.outcome: Invalid option");
  expect(text).toContain("waiting for the signal");
});

it("draws a parallel item's branches side by side on the item's own time axis", () => {
  const at = (ms: number) => new Date(now.getTime() - 10_000 + ms);
  const branch = (name: string, from: number, to: number | null, outcome: HistoryEntry["outcome"]): HistoryEntry => ({
    kind: "branch",
    name: "notify",
    branch: name,
    attempt: 1,
    derivedKey: `idem_${name}`,
    outcome,
    error: null,
    startedAt: at(from),
    finishedAt: to === null ? null : at(to),
    tries: null,
  });
  const history: HistoryEntry[] = [
    { ...branch("x", 0, 10, "succeeded"), kind: "phase", name: "create_order", branch: null, derivedKey: null },
    { ...branch("x", 10, 1_000, "succeeded"), kind: "parallel", branch: null, derivedKey: null },
    branch("email", 10, 1_000, "succeeded"),
    branch("sms", 10, 505, "succeeded"),
    branch("push", 505, 1_000, "succeeded"),
    { ...branch("x", 1_000, 1_010, "succeeded"), kind: "phase", name: "record", branch: null, derivedKey: null },
  ];
  const text = timelineTable(history, now, false, painter(false), 200);
  const lines = text.split("\n");
  expect(text).toContain("notify/email");
  expect(text).toContain("branches of notify side by side (990ms in all):");
  const lane = (name: string) => lines.find((l) => new RegExp(`^\\s+${name}\\s+attempt 1 `).test(l)) ?? "";
  const bar = (name: string) => /([·█░]{30})/.exec(lane(name))?.[1] ?? "";
  // email runs the whole span; sms the first half; push the second half: sms and push overlap email, not each other.
  expect(bar("email")).toBe("█".repeat(30));
  expect(bar("sms")).toMatch(/^█{15}·{15}$/);
  expect(bar("push")).toMatch(/^·{15}█{15}$/);
  // The drawing comes after the last branch row and before the next item.
  const drawn = lines.findIndex((l) => l.includes("side by side"));
  expect(drawn).toBeGreaterThan(lines.findIndex((l) => l.includes("notify/push")));
  expect(drawn).toBeLessThan(lines.findIndex((l) => l.includes("record")));
});

it("draws a branch that started and never finished as in doubt, up to the end of the group", () => {
  const history: HistoryEntry[] = ["a", "b"].map((b, i) => ({
    kind: "branch",
    name: "fan",
    branch: b,
    attempt: 1,
    derivedKey: `idem_${b}`,
    outcome: i === 0 ? "succeeded" : "started",
    error: null,
    startedAt: new Date(now.getTime() - 2_000),
    finishedAt: i === 0 ? new Date(now.getTime() - 1_000) : null,
    tries: null,
  }));
  const text = timelineTable(history, now, false, painter(false), 200);
  expect(text).toMatch(/ a {2}attempt 1 {2}█{30} {2}succeeded/);
  expect(text).toMatch(/ b {2}attempt 1 {2}░{30} {2}started/);
  expect(text).toContain("started, result unknown");
});
