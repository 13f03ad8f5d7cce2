/** `idempo keys list`: records newest first, filtered and paginated. */
import type { RunRecord } from "@idempo/core";
import type { Command } from "commander";
import { Option } from "commander";
import { withDatabase } from "../connection.js";
import { deliveredSignals, factsOf } from "../delivered-signals.js";
import type { SuspensionFacts } from "../format/diagnosis.js";
import { keyTable, suspendedTable } from "../format/key-table.js";
import { keyJson } from "../format/record-json.js";
import type { Io } from "../io.js";
import { forEachKeyPage } from "../key-pages.js";
import { plural, printJsonLines } from "../output.js";
import { parseAge, parseLimit, usageError } from "../usage.js";

interface ListOptions {
  tenant?: string;
  workflow?: string;
  status?: "in_flight" | "completed" | "parked" | "suspended";
  stuck?: boolean;
  olderThan?: number;
  limit: number;
  cursor?: string;
  all?: boolean;
  json?: boolean;
}

/** Register `keys list` under `keys`. */
export function registerKeysList(keys: Command, io: Io): void {
  keys
    .command("list")
    .description("list keys newest first: status, recovery point, attempts, lease and age")
    .option("--tenant <tenant>", "only this tenant")
    .option("--workflow <name>", "only this workflow")
    .addOption(
      new Option("--status <status>", "only this status").choices(["in_flight", "completed", "parked", "suspended"]),
    )
    .option("--stuck", "only in-flight keys whose lease has expired")
    .option("--older-than <duration>", "only keys created at least this long ago, e.g. 90s, 10m, 2h, 1d", parseAge)
    .option("--limit <n>", "rows per page, 1-1000", parseLimit, 50)
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .option("--all", "print every page")
    .option("--json", "one JSON object per line (see docs/cli.md)")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo keys list --tenant acme
  $ idempo keys list --status in_flight --older-than 10m
  $ idempo keys list --status suspended       # what each waits for, when it wakes
  $ idempo keys list --workflow checkout --all --json | jq -r .key`,
    )
    .action(async (opts: ListOptions, command: Command) => {
      if (opts.stuck && opts.status !== undefined && opts.status !== "in_flight")
        usageError(command, `--stuck lists in-flight keys; drop --status ${opts.status}`);
      await withDatabase(command, async ({ engine, db, schema, now }) => {
        let count = 0;
        const query = {
          ...(opts.tenant !== undefined ? { tenantId: opts.tenant } : {}),
          ...(opts.workflow !== undefined ? { workflow: opts.workflow } : {}),
          ...(opts.status !== undefined ? { status: opts.status } : {}),
          ...(opts.stuck ? { stuck: true } : {}),
          ...(opts.olderThan !== undefined ? { olderThanMs: opts.olderThan } : {}),
        };
        const paging = { limit: opts.limit, all: opts.all === true, ...(opts.cursor ? { cursor: opts.cursor } : {}) };
        const printed: RunRecord[] = [];
        const facts = new Map<RunRecord, SuspensionFacts>();
        const { nextCursor } = await forEachKeyPage(engine, query, paging, now, async (items) => {
          count += items.length;
          const found = await deliveredSignals(db, schema, items);
          for (const r of items) facts.set(r, factsOf(found, r));
          if (opts.json)
            printJsonLines(
              io,
              items.map((r) => keyJson(r, now, facts.get(r))),
            );
          else printed.push(...items);
        });
        if (opts.json) {
          if (nextCursor) io.err(`more keys: add --cursor ${nextCursor}\n`);
          return;
        }
        if (count === 0) {
          io.out("no keys match\n");
          return;
        }
        const factsFor = (r: RunRecord) => facts.get(r) ?? {};
        io.out(
          opts.status === "suspended"
            ? suspendedTable(printed, now, io.paint, factsFor)
            : keyTable(printed, now, io.paint, factsFor),
        );
        const more = nextCursor ? `; next page: --cursor ${nextCursor}` : "";
        io.out(io.paint("dim", `${plural(count, "key")}${more}\n`));
      });
    });
}
