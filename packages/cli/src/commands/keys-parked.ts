/** `idempo keys parked`: runs the engine stopped trying, each with why and what to do. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { formatDuration } from "../format/duration.js";
import { keyJson } from "../format/record-json.js";
import type { Row } from "../format/table.js";
import { renderTable } from "../format/table.js";
import type { Io } from "../io.js";
import { forEachKeyPage } from "../key-pages.js";
import { plural, printJsonLines } from "../output.js";
import { parseLimit } from "../usage.js";

interface ParkedOptions {
  tenant?: string;
  workflow?: string;
  limit: number;
  cursor?: string;
  all?: boolean;
  json?: boolean;
}

/** Register `keys parked` under `keys`. */
export function registerKeysParked(keys: Command, io: Io): void {
  keys
    .command("parked")
    .description("runs the engine stopped trying (attempts exhausted, a value it cannot store), with the reason")
    .option("--tenant <tenant>", "only this tenant")
    .option("--workflow <name>", "only this workflow")
    .option("--limit <n>", "keys per page, 1-1000", parseLimit, 50)
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .option("--all", "print every page")
    .option("--json", "one JSON object per line: the keys list fields (parkedReason included) and parkedAt")
    .addHelpText(
      "after",
      `
A parked run answers every call with run_parked (500) and is never resumed. Fix
the cause, then: idempo keys unpark (resume after the recovery point), keys
retry-from (run an item again), or keys cancel (store a final answer).

Examples:
  $ idempo keys parked
  $ idempo keys parked --tenant acme --json | jq -r .parkedReason`,
    )
    .action(async (opts: ParkedOptions, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const query = {
          status: "parked" as const,
          ...(opts.tenant !== undefined ? { tenantId: opts.tenant } : {}),
          ...(opts.workflow !== undefined ? { workflow: opts.workflow } : {}),
        };
        const paging = { limit: opts.limit, all: opts.all === true, ...(opts.cursor ? { cursor: opts.cursor } : {}) };
        const rows: Row[] = [];
        let count = 0;
        const { nextCursor } = await forEachKeyPage(engine, query, paging, now, (items) => {
          for (const record of items) {
            count++;
            const parkedFor = record.parkedAt ? Math.max(0, now.getTime() - record.parkedAt.getTime()) : 0;
            if (opts.json) {
              printJsonLines(io, [{ ...keyJson(record, now), parkedAt: record.parkedAt?.toISOString() ?? null }]);
              continue;
            }
            rows.push(
              [
                record.tenantId,
                record.key,
                record.workflow,
                record.recoveryPoint ?? "-",
                String(record.attempt),
                formatDuration(parkedFor),
              ],
              { note: `${io.paint("red", "↳")} ${record.parkedReason ?? "parked"}` },
            );
          }
        });
        if (opts.json) {
          if (nextCursor) io.err(`more keys: add --cursor ${nextCursor}\n`);
          return;
        }
        if (count === 0) {
          io.out("no parked keys\n");
          return;
        }
        io.out(`${plural(count, "parked key")}:\n\n`);
        io.out(
          renderTable(
            [
              { header: "TENANT", shrink: true },
              { header: "KEY", shrink: true },
              { header: "WORKFLOW", shrink: true },
              { header: "RECOVERY POINT", shrink: true },
              { header: "ATTEMPTS", align: "right" },
              { header: "PARKED FOR", align: "right" },
            ],
            rows,
            io.paint,
          ),
        );
        const more = nextCursor ? `next page: --cursor ${nextCursor}\n` : "";
        io.out(
          io.paint("dim", `\nafter the fix: idempo keys unpark <tenant> <key>, or keys cancel to answer it\n${more}`),
        );
      });
    });
}
