/**
 * A parallel item in `keys show` and on the console: the outline names its
 * branches, the timeline lists each branch call and draws them side by side,
 * a crashed item names the branch in doubt, and the console's timeline
 * indents the branches under the item on one time axis.
 */
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { runPage } from "../src/console/run-page.ts";
import { diagnose } from "../src/format/diagnosis.ts";
import { keyDetailJson } from "../src/format/record-json.ts";
import { idempo } from "./support/cli.ts";

let emailRecorded!: () => void;
const emailDone = new Promise<void>((r) => {
  emailRecorded = r;
});
const notify = workflow("order_notify")
  .phase("create_order", () => ({ orderId: "o-1" }))
  .parallel("notify", (p) =>
    p
      .step("email", () => ({ messageId: "m-1" }))
      .step("sms", async ({ key }) => {
        // In the run that crashes, the sms call returns only once the email is recorded.
        if (key === "crashed") await emailDone;
        return { smsId: "s-1" };
      }),
  )
  .respond(({ state }) => ({ status: 200, body: state.notify }));

const clone = useClonedDatabase("idempo_cli_parallel", {
  pool: 4,
  prepare: async (db) => {
    const engine: Engine = createEngine({ db });
    await engine.runOnce(notify, { tenantId: "t-par", key: "done", input: {} });
    setFaultHook(engine, (point) => {
      if (point === "after:branch:notify/email") emailRecorded();
      if (point === "called:branch:notify/sms") throw new CrashSignal(point);
    });
    await engine.runOnce(notify, { tenantId: "t-par", key: "crashed", input: {} }).catch((e: unknown) => {
      if (!(e instanceof CrashSignal)) throw e;
    });
    setFaultHook(engine, undefined);
    await engine.release("t-par", "crashed");
  },
});
const run = (args: string[]) => idempo(args, { DATABASE_URL: clone.url });

describe("keys show and a parallel item", () => {
  it("names the branches in the outline, lists each call and draws them side by side", async () => {
    const show = await run(["keys", "show", "t-par", "done"]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain("✓ parallel notify (email | sms)");
    expect(show.stdout).toMatch(/parallel\s+notify\s+1\s+\S+\s+succeeded/);
    expect(show.stdout).toMatch(/branch\s+notify\/email\s+1\s+\S+\s+succeeded/);
    expect(show.stdout).toMatch(/branch\s+notify\/sms\s+1\s+\S+\s+succeeded/);
    expect(show.stdout).toContain("branches of notify side by side");
    expect(show.stdout).toMatch(/ email {2}attempt 1 {2}[·█]{30} {2}succeeded/);
    expect(show.stdout).toMatch(/ sms {4}attempt 1 {2}[·█]{30} {2}succeeded/);
  });

  it("a crashed item: the branch in doubt, and what a takeover calls again", async () => {
    const show = await run(["keys", "show", "t-par", "crashed"]);
    expect(show.code).toBe(0);
    // The fields wrap at the table's width: read them as one line each.
    const flat = show.stdout.replace(/\n {17}/g, " ");
    expect(flat).toContain("in branch sms of parallel notify (started, result unknown)");
    expect(flat).toMatch(/call branch sms of parallel notify again with the same derived key idem_/);
    expect(flat).toContain("? parallel notify (email | sms)");
    expect(show.stdout).toMatch(/ sms {4}attempt 1 {2}[·░]{30} {2}started/);
  });

  it("--json gives each branch entry its branch", async () => {
    const record = await createEngine({ db: clone.db }).inspect("t-par", "done");
    if (!record || record.status === "expired") throw new Error("seeded run missing");
    // What `keys show --json` prints, made in process: spawning the command again adds nothing here.
    const now = new Date();
    const json = keyDetailJson(record, diagnose(record, now), now, { state: false, response: false });
    const entries = json.history.map((h) => [h.kind, h.name, h.branch]);
    // The item's entry first (it starts with its first branch), then its branches in the order they started.
    expect(entries.slice(0, 2)).toEqual([
      ["phase", "create_order", null],
      ["parallel", "notify", null],
    ]);
    expect(entries.slice(2).sort()).toEqual([
      ["branch", "notify", "email"],
      ["branch", "notify", "sms"],
    ]);
  });
});

describe("the console's timeline and a parallel item", () => {
  it("indents each branch under the item, with its branch named, on the one time axis", async () => {
    const record = await createEngine({ db: clone.db }).inspect("t-par", "done");
    if (!record || record.status === "expired") throw new Error("seeded run missing");
    const page = String(await runPage(record, new Date(), false));
    const branches = [
      ...page.matchAll(
        /<g data-entry="branch:notify:1" data-outcome="succeeded" data-branch="(\w+)">\s*<text x="16"[^>]*>([^<]*)</g,
      ),
    ];
    expect(branches.map((m) => [m[1], m[2]]).sort()).toEqual([
      ["email", "↳ notify › email · attempt 1"],
      ["sms", "↳ notify › sms · attempt 1"],
    ]);
    expect(page).toMatch(
      /<g data-entry="parallel:notify:1" data-outcome="succeeded">\s*<text x="0"[^>]*>parallel notify · attempt 1</,
    );
  });
});
