/** `idempo schedules list`: every stored schedule with its next tick. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { scheduleJson, scheduleTable } from "../format/schedule-table.js";
import type { Io } from "../io.js";
import { plural, printJsonLines } from "../output.js";

/** Register `schedules list` under `schedules`. */
export function registerSchedulesList(schedules: Command, io: Io): void {
  schedules
    .command("list")
    .description("every schedule by name, with its state and next tick")
    .option("--json", "one JSON object per line (see docs/cli.md)")
    .addHelpText("after", "\nExamples:\n  $ idempo schedules list\n  $ idempo schedules list --json")
    .action(async (opts: { json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const all = await engine.listSchedules();
        if (opts.json) return printJsonLines(io, all.map(scheduleJson));
        if (all.length === 0) return io.out("no schedules\n");
        io.out(scheduleTable(all, now, io.paint));
        io.out(io.paint("dim", `${plural(all.length, "schedule")}\n`));
      });
    });
}
