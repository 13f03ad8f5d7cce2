/** `idempo outbox list` (and `outbox dead`): outbox messages newest first. */
import type { ListOutboxOptions } from "@idempo/core";
import type { Command } from "commander";
import { Option } from "commander";
import { withDatabase } from "../connection.js";
import { outboxJson, outboxTable } from "../format/outbox-table.js";
import type { Io } from "../io.js";
import { plural, printJsonLines } from "../output.js";
import { parseLimit } from "../usage.js";

interface OutboxListOptions {
  tenant?: string;
  topic?: string;
  status?: "pending" | "delivered" | "dead";
  limit: number;
  json?: boolean;
}

/** List messages with `status` fixed (for `outbox dead`) or taken from `--status`. */
export async function listOutbox(command: Command, io: Io, opts: OutboxListOptions): Promise<void> {
  await withDatabase(command, async ({ engine }) => {
    const filter: ListOutboxOptions = { limit: opts.limit };
    if (opts.tenant !== undefined) filter.tenantId = opts.tenant;
    if (opts.topic !== undefined) filter.topic = opts.topic;
    if (opts.status !== undefined) filter.status = opts.status;
    const messages = await engine.listOutbox(filter);
    if (opts.json) return printJsonLines(io, messages.map(outboxJson));
    if (messages.length === 0) return io.out("no outbox messages match\n");
    io.out(outboxTable(messages, io.paint));
    io.out(io.paint("dim", `${plural(messages.length, "message")}\n`));
  });
}

/** Register `outbox list` under `outbox`. */
export function registerOutboxList(outbox: Command, io: Io): void {
  outbox
    .command("list")
    .description("outbox messages newest first")
    .option("--tenant <tenant>", "only this tenant")
    .option("--topic <topic>", "only this topic")
    .addOption(new Option("--status <status>", "only this status").choices(["pending", "delivered", "dead"]))
    .option("--limit <n>", "most messages, 1-1000", parseLimit, 50)
    .option("--json", "one JSON object per line (see docs/cli.md)")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo outbox list --status pending
  $ idempo outbox list --tenant acme --topic receipt.email --json`,
    )
    .action((opts: OutboxListOptions, command: Command) => listOutbox(command, io, opts));
}
