/** `idempo stats`: counts by workflow and status, stuck count, oldest in-flight run. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { formatDuration } from "../format/duration.js";
import { renderTable } from "../format/table.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";

/** Register `stats` on the program. */
export function registerStats(program: Command, io: Io): void {
  program
    .command("stats")
    .description("record counts by workflow and status, stuck and expired counts, oldest in-flight run")
    .option(
      "--json",
      "print one JSON object: {inFlight, completed, stuck, expired, oldestInFlightAt, workflows: [...]}",
    )
    .addHelpText(
      "after",
      `
Examples:
  $ idempo stats
  $ idempo stats --json | jq .stuck`,
    )
    .action(async (opts: { json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const stats = await engine.stats();
        const sum = (pick: (s: (typeof stats)[number]) => number) => stats.reduce((n, s) => n + pick(s), 0);
        const inFlight = stats.filter((s) => s.status === "in_flight");
        const oldest = inFlight
          .map((s) => s.oldestCreatedAt)
          .filter((d): d is Date => d !== null)
          .sort((a, b) => a.getTime() - b.getTime())[0];
        const summary = {
          inFlight: sum((s) => (s.status === "in_flight" ? s.records : 0)),
          completed: sum((s) => (s.status === "completed" ? s.records : 0)),
          stuck: sum((s) => s.stuck),
          expired: sum((s) => s.expired),
          oldestInFlightAt: oldest ? oldest.toISOString() : null,
          workflows: stats.map((s) => ({
            workflow: s.workflow,
            status: s.status,
            records: s.records,
            stuck: s.stuck,
            expired: s.expired,
            oldestCreatedAt: s.oldestCreatedAt ? s.oldestCreatedAt.toISOString() : null,
          })),
        };
        if (opts.json) return printJson(io, summary);
        if (stats.length === 0) return io.out("no records\n");
        const p = io.paint;
        io.out(
          renderTable(
            [
              { header: "WORKFLOW", shrink: true },
              { header: "STATUS" },
              { header: "RECORDS", align: "right" },
              { header: "STUCK", align: "right" },
              { header: "EXPIRED", align: "right" },
              { header: "OLDEST", align: "right" },
            ],
            stats.map((s) => [
              s.workflow,
              s.status === "in_flight" ? "in flight" : "completed",
              String(s.records),
              s.stuck > 0 ? p("red", String(s.stuck)) : "0",
              String(s.expired),
              s.oldestCreatedAt ? formatDuration(now.getTime() - s.oldestCreatedAt.getTime()) : "-",
            ]),
            p,
          ),
        );
        const age = oldest ? `${formatDuration(now.getTime() - oldest.getTime())} old` : "none";
        io.out(
          `\nin flight ${summary.inFlight} (${summary.stuck > 0 ? p("red", `${summary.stuck} stuck`) : "0 stuck"}), ` +
            `completed ${summary.completed} (${summary.expired} past retention), oldest in flight: ${age}\n`,
        );
      });
    });
}
