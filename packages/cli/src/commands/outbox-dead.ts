/** `idempo outbox dead`: dead-lettered messages, the ones that need a person. */
import type { Command } from "commander";
import type { Io } from "../io.js";
import { parseLimit } from "../usage.js";
import { listOutbox } from "./outbox-list.js";

/** Register `outbox dead` under `outbox`. */
export function registerOutboxDead(outbox: Command, io: Io): void {
  outbox
    .command("dead")
    .description("dead-lettered messages (delivery gave up), with their last error")
    .option("--tenant <tenant>", "only this tenant")
    .option("--topic <topic>", "only this topic")
    .option("--limit <n>", "most messages, 1-1000", parseLimit, 50)
    .option("--json", "one JSON object per line (see docs/cli.md)")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo outbox dead
  $ idempo outbox retry acme 01J9Z3Q6W8K2M4N6P8R0S2T4V6   # put one back in line`,
    )
    .action((opts: { tenant?: string; topic?: string; limit: number; json?: boolean }, command: Command) =>
      listOutbox(command, io, { ...opts, status: "dead" }),
    );
}
