/** `idempo resume --workflows MODULE`: finish abandoned runs once with `engine.resumeStale`. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { renderTable } from "../format/table.js";
import { visible } from "../format/visible.js";
import type { Io } from "../io.js";
import { plural, printJsonLines } from "../output.js";
import { startProgress } from "../progress.js";
import { parseLimit } from "../usage.js";
import { loadWorkflows } from "../workflow-module.js";

/** Register `resume` on the program. */
export function registerResume(program: Command, io: Io): void {
  program
    .command("resume")
    .description("take over in-flight runs whose lease expired and finish them from their recovery point, once")
    .requiredOption(
      "--workflows <module>",
      "module exporting the workflow definitions to resume (.js, or .ts through tsx)",
    )
    .option("--limit <n>", "most runs to take over, 1-1000", parseLimit, 100)
    .option("--json", "one JSON object per run: {tenantId, key, workflow, result, status?, outcome?, error?, reason?}")
    .addHelpText(
      "after",
      `
Runs of workflows the module does not export are left alone. A run whose attempts ran out
(maxAttempts) is parked by its takeover and listed as parked with its reason; see
idempo keys parked. Exit status 1 when a run failed.

Examples:
  $ idempo resume --workflows ./dist/workflows.js
  $ idempo resume --workflows ./dist/workflows.js --limit 10 --json`,
    )
    .action(async (opts: { workflows: string; limit: number; json?: boolean }, command: Command) => {
      const workflows = await loadWorkflows(opts.workflows);
      await withDatabase(command, async ({ engine }) => {
        const progress = startProgress(io, `resuming stale runs of ${workflows.map((w) => w.name).join(", ")}…`);
        const report = await engine.resumeStale({ workflows, limit: opts.limit }).finally(() => progress.done());
        if (opts.json) {
          printJsonLines(io, [
            ...report.resumed.map((r) => ({ ...r, result: "finished" })),
            ...report.failed.map((f) => ({
              tenantId: f.tenantId,
              key: f.key,
              workflow: f.workflow,
              result: "failed",
              error: f.error.message,
            })),
            ...report.parked.map((p) => ({ ...p, result: "parked" })),
          ]);
        } else if (report.resumed.length + report.failed.length + report.parked.length === 0) {
          io.out(`no stale runs of ${workflows.map((w) => w.name).join(", ")}\n`);
        } else {
          const rows = [
            ...report.resumed.map((r) => [
              visible(r.tenantId),
              visible(r.key),
              r.workflow,
              io.paint("green", "finished"),
              `${r.status} ${r.outcome}`,
            ]),
            ...report.failed.flatMap((f) => [
              [visible(f.tenantId), visible(f.key), f.workflow, io.paint("red", "failed"), "-"],
              { note: io.paint("red", f.error.message) },
            ]),
            ...report.parked.flatMap((p) => [
              [visible(p.tenantId), visible(p.key), p.workflow, io.paint("yellow", "parked"), "-"],
              { note: p.reason },
            ]),
          ];
          io.out(
            renderTable(
              [
                { header: "TENANT", shrink: true },
                { header: "KEY", shrink: true },
                { header: "WORKFLOW", shrink: true },
                { header: "RESULT" },
                { header: "RESPONSE" },
              ],
              rows,
              io.paint,
            ),
          );
          io.out(
            `${plural(report.resumed.length, "run")} finished, ${report.failed.length} failed, ` +
              `${report.parked.length} parked\n`,
          );
        }
        if (report.failed.length > 0) {
          throw new OperationalError(`${plural(report.failed.length, "run")} could not be finished (see above)`);
        }
      });
    });
}
