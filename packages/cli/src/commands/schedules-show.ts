/** `idempo schedules show NAME`: one schedule, field by field. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { scheduleDetail, scheduleJson } from "../format/schedule-table.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";
import { checkScheduleName } from "../usage.js";

/** Register `schedules show` under `schedules`. */
export function registerSchedulesShow(schedules: Command, io: Io): void {
  schedules
    .command("show")
    .description("one schedule: its cron, zone, catch-up, next and last tick, last error")
    .argument("<name>", "the schedule's name")
    .option("--json", "print the schedule as one JSON object")
    .addHelpText("after", "\nExamples:\n  $ idempo schedules show nightly-invoices")
    .action(async (name: string, opts: { json?: boolean }, command: Command) => {
      checkScheduleName(command, name);
      await withDatabase(command, async ({ engine, now }) => {
        const found = (await engine.listSchedules()).find((s) => s.name === name);
        if (!found) throw new OperationalError(`no schedule named '${name}' (idempo schedules list shows them)`);
        if (opts.json) return printJson(io, scheduleJson(found));
        io.out(scheduleDetail(found, now, io.paint));
      });
    });
}
