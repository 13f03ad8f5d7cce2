/**
 * Fault of the kind "the history counts attempts, not calls": a step that
 * its `retries` called three times showed as one timeline row, so the two
 * calls that failed, their errors and their durations, were not shown by
 * `keys show` or the console. Each call is listed under its step: in the
 * table, in `--json` and on the console's run page.
 */
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { runPage } from "../src/console/run-page.ts";
import { idempo } from "./support/cli.ts";

class Transient extends Error {}
let calls = 0;
const flaky = workflow("flaky_charge")
  .phase("prepare", () => ({ ready: true }))
  .step(
    "charge",
    () => {
      calls++;
      if (calls <= 2) throw new Transient(`provider 503 #${calls}`);
      return { charged: calls };
    },
    { retries: 3, retryable: (e) => e instanceof Transient, backoffMs: 1, maxBackoffMs: 1 },
  )
  .respond(({ state }) => ({ status: 201, body: state }));

const clone = useClonedDatabase("idempo_cli_tries", {
  pool: 2,
  prepare: async (db) => {
    const engine: Engine = createEngine({ db });
    await engine.runOnce(flaky, { tenantId: "t-tries", key: "order-1", input: {} });
  },
});
const run = (args: string[]) => idempo(args, { DATABASE_URL: clone.url });

describe("keys show lists every call of a retried step", () => {
  it("the table shows three tries under the step, two with their errors, each with a duration", async () => {
    const show = await run(["keys", "show", "t-tries", "order-1"]);
    expect(show.code).toBe(0);
    const lines = show.stdout.split("\n");
    const tries = lines.filter((l) => /\btry \d/.test(l));
    expect(tries).toHaveLength(3);
    expect(tries[0]).toMatch(/try 1\/3\s+failed\s+\d+ms\s+provider 503 #1/);
    expect(tries[1]).toMatch(/try 2\/3\s+failed\s+\d+ms\s+provider 503 #2/);
    expect(tries[2]).toMatch(/try 3\/3\s+succeeded\s+\d+ms/);
  });

  it("--json carries the tries with errors and durations", async () => {
    const show = await run(["keys", "show", "t-tries", "order-1", "--json"]);
    expect(show.code).toBe(0);
    const record = JSON.parse(show.stdout) as {
      history: { kind: string; tries: { error: string | null; durationMs: number }[] | null }[];
    };
    const step = record.history.find((h) => h.kind === "step");
    expect(step?.tries?.map((x) => x.error)).toEqual(["provider 503 #1", "provider 503 #2", null]);
    for (const x of step?.tries ?? []) expect(typeof x.durationMs).toBe("number");
  });
});

describe("the console's run page lists every call of a retried step", () => {
  it("one row per try under the step, with its outcome, duration and error", async () => {
    const record = await createEngine({ db: clone.db }).inspect("t-tries", "order-1");
    if (!record || record.status === "expired") throw new Error("seeded run missing");
    const page = String(await runPage(record, new Date(), false));
    const rows = [...page.matchAll(/<tr class="try" data-try="(\d)">([\s\S]*?)<\/tr>/g)].map((m) =>
      [...(m[2] ?? "").matchAll(/<td>([^<]*)<\/td>/g)].map((c) => c[1]),
    );
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => [r[1], r[3], r[6]])).toEqual([
      ["1 of 3", "failed", "provider 503 #1"],
      ["2 of 3", "failed", "provider 503 #2"],
      ["3 of 3", "succeeded", ""],
    ]);
    for (const r of rows) expect(r[4]).toMatch(/^\d+ms$/);
  });
});
