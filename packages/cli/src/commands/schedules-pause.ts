/** `idempo schedules pause NAME` and `idempo schedules resume NAME`. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { scheduleJson } from "../format/schedule-table.js";
import { whenLabel } from "../format/times.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";
import { checkScheduleName } from "../usage.js";

type Verb = "pause" | "resume";

const HELP: Record<Verb, { description: string; after: string }> = {
  pause: {
    description: "stop a schedule from starting runs until it is resumed (runs already started go on)",
    after: `
A paused schedule stays paused when the application calls schedule() again at
start-up. Its ticks while paused are skipped, not caught up, when it resumes.

Examples:
  $ idempo schedules pause nightly-invoices --yes`,
  },
  resume: {
    description: "let a paused schedule fire again, from its first tick after now",
    after: "\nExamples:\n  $ idempo schedules resume nightly-invoices --yes",
  },
};

function register(schedules: Command, io: Io, verb: Verb): void {
  schedules
    .command(verb)
    .description(HELP[verb].description)
    .argument("<name>", "the schedule's name")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print the schedule after the change as one JSON object")
    .addHelpText("after", HELP[verb].after)
    .action(async (name: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      checkScheduleName(command, name);
      await withDatabase(command, async ({ engine, now }) => {
        const before = (await engine.listSchedules()).find((s) => s.name === name);
        if (!before) throw new OperationalError(`no schedule named '${name}' (idempo schedules list shows them)`);
        if (before.paused === (verb === "pause")) {
          throw new OperationalError(`schedule '${name}' is ${before.paused ? "paused already" : "not paused"}`);
        }
        await confirmChange(
          command,
          io,
          opts.yes === true,
          `${verb === "pause" ? "Pause" : "Resume"} schedule ${name}?`,
        );
        const after = await (verb === "pause" ? engine.pauseSchedule(name) : engine.resumeSchedule(name));
        if (!after) throw new OperationalError(`schedule '${name}' was deleted meanwhile`);
        if (opts.json) return printJson(io, scheduleJson(after));
        const next = after.nextTickAt ? whenLabel(after.nextTickAt, now) : "never";
        io.out(
          verb === "pause"
            ? `paused schedule ${name}: no tick starts a run until it is resumed\n`
            : `resumed schedule ${name}: next tick ${next}\n`,
        );
      });
    });
}

/** Register `schedules pause` under `schedules`. */
export function registerSchedulesPause(schedules: Command, io: Io): void {
  register(schedules, io, "pause");
}

/** Register `schedules resume` under `schedules`. */
export function registerSchedulesResume(schedules: Command, io: Io): void {
  register(schedules, io, "resume");
}
