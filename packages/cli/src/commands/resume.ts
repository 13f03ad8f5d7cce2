/**
 * `idempo resume --workflows MODULE`: finish what no process is working on,
 * once: stale in-flight runs (lease expired) are taken over with
 * `engine.resumeStale`, and due suspended runs (a sleep that ended, a
 * signal that arrived, a wait that timed out, an enqueued run) are resumed
 * the way a worker resumes them, for when no worker runs.
 */
import type { Engine } from "@idempo/core";
import { resumeDue } from "@idempo/core/internal";
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import type { Row } from "../format/table.js";
import { renderTable } from "../format/table.js";
import { visible } from "../format/visible.js";
import type { Io } from "../io.js";
import { plural, printJsonLines } from "../output.js";
import { startProgress } from "../progress.js";
import { parseLimit } from "../usage.js";
import { loadWorkflows } from "../workflow-module.js";

type Workflows = Parameters<Engine["resumeStale"]>[0]["workflows"];

/** One run `resume` touched: what it was (`stale` or `due`) and what became of it. */
interface Outcome {
  tenantId: string;
  key: string;
  workflow: string;
  was: "stale" | "due";
  /** `suspended`: it ran to its next sleep or wait and waits there again. */
  result: "finished" | "suspended" | "failed" | "parked";
  status?: number;
  outcome?: string;
  error?: string;
  reason?: string;
}

/** Stale runs first (their takeover is what a client retry would do), then the due ones. */
async function resumeAll(engine: Engine, workflows: Workflows, limit: number): Promise<Outcome[]> {
  const stale = await engine.resumeStale({ workflows, limit });
  const due = await resumeDue(engine, { workflows, limit });
  const ran =
    (was: Outcome["was"]) =>
    (r: { tenantId: string; key: string; workflow: string; status: number; outcome: string }): Outcome => ({
      ...r,
      was,
      result: r.outcome === "suspended" ? "suspended" : "finished",
    });
  const failed =
    (was: Outcome["was"]) =>
    (f: { tenantId: string; key: string; workflow: string; error: Error }): Outcome => ({
      tenantId: f.tenantId,
      key: f.key,
      workflow: f.workflow,
      was,
      result: "failed",
      error: f.error.message,
    });
  return [
    ...stale.resumed.map(ran("stale")),
    ...stale.failed.map(failed("stale")),
    ...stale.parked.map((p): Outcome => ({ ...p, was: "stale", result: "parked" })),
    ...due.resumed.map(ran("due")),
    ...due.failed.map(failed("due")),
  ];
}

const RESULT_COLOUR = { finished: "green", suspended: "cyan", failed: "red", parked: "yellow" } as const;

function printTable(io: Io, outcomes: readonly Outcome[]): void {
  const rows: Row[] = outcomes.flatMap((o): Row[] => {
    const row = [
      visible(o.tenantId),
      visible(o.key),
      visible(o.workflow),
      o.was,
      io.paint(RESULT_COLOUR[o.result], o.result),
      o.status === undefined ? "-" : `${o.status} ${o.outcome ?? ""}`,
    ];
    if (o.error !== undefined) return [row, { note: io.paint("red", visible(o.error)) }];
    if (o.reason !== undefined) return [row, { note: visible(o.reason) }];
    return [row];
  });
  const columns = [
    { header: "TENANT", shrink: true },
    { header: "KEY", shrink: true },
    { header: "WORKFLOW", shrink: true },
    { header: "WAS" },
    { header: "RESULT" },
    { header: "RESPONSE" },
  ];
  io.out(renderTable(columns, rows, io.paint));
  const count = (was: Outcome["was"]) => outcomes.filter((o) => o.was === was).length;
  const all = (result: Outcome["result"]) => outcomes.filter((o) => o.result === result).length;
  io.out(
    `${plural(count("stale"), "stale run")} taken over, ${plural(count("due"), "due run")} resumed: ` +
      `${all("finished")} finished, ${all("suspended")} suspended again, ${all("failed")} failed, ${all("parked")} parked\n`,
  );
}

/** Register `resume` on the program. */
export function registerResume(program: Command, io: Io): void {
  program
    .command("resume")
    .description(
      "finish what no process is working on, once: take over stale in-flight runs and resume due suspended runs",
    )
    .requiredOption(
      "--workflows <module>",
      "module exporting the workflow definitions to resume (.js, or .ts through tsx)",
    )
    .option("--limit <n>", "most runs of each kind (stale, due) to resume, 1-1000", parseLimit, 100)
    .option(
      "--json",
      'one JSON object per run: {tenantId, key, workflow, was: "stale" | "due", result, status?, outcome?, error?, reason?}',
    )
    .addHelpText(
      "after",
      `
Stale runs are in flight with an expired lease (their process is gone): each is taken over
and run from its recovery point, as a client retry would. Due runs are suspended and due (a
sleep that ended, a signal that arrived, a wait that timed out, an enqueued run), which
only a worker or a retry resumes: each is run to its end or to its next sleep or wait
(listed as suspended). Runs of workflows the module does not export are left alone. A run
whose attempts ran out (maxAttempts) is parked by its takeover and listed as parked with
its reason; see idempo keys parked. Exit status 1 when a run failed.

Examples:
  $ idempo resume --workflows ./dist/workflows.js
  $ idempo resume --workflows ./dist/workflows.js --limit 10 --json`,
    )
    .action(async (opts: { workflows: string; limit: number; json?: boolean }, command: Command) => {
      const workflows = await loadWorkflows(opts.workflows);
      const names = workflows.map((w) => w.name).join(", ");
      await withDatabase(command, async ({ engine }) => {
        const progress = startProgress(io, `resuming stale and due runs of ${names}…`);
        const outcomes = await resumeAll(engine, workflows, opts.limit).finally(() => progress.done());
        if (opts.json) printJsonLines(io, outcomes);
        else if (outcomes.length === 0) {
          io.out(`nothing to resume: no stale in-flight runs and no due suspended runs of ${names}\n`);
        } else printTable(io, outcomes);
        const failed = outcomes.filter((o) => o.result === "failed").length;
        if (failed > 0) throw new OperationalError(`${plural(failed, "run")} could not be finished (see above)`);
      });
    });
}
