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
