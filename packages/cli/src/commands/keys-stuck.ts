/** `idempo keys stuck`: in-flight keys whose lease expired, each with where it stopped. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { describeRetry, diagnose, stuckReason } from "../format/diagnosis.js";
import { formatDuration } from "../format/duration.js";
import { ageLabel } from "../format/key-table.js";
import { keyDetailJson, keyJson } from "../format/record-json.js";
import type { Row } from "../format/table.js";
import { renderTable } from "../format/table.js";
import { visible } from "../format/visible.js";
import type { Io } from "../io.js";
import { forEachKeyPage } from "../key-pages.js";
import { plural, printJsonLines } from "../output.js";
import { parseAge, parseLimit } from "../usage.js";

interface StuckOptions {
  tenant?: string;
  workflow?: string;
  olderThan?: number;
  limit: number;
  cursor?: string;
  all?: boolean;
  json?: boolean;
}

/** Register `keys stuck` under `keys`. */
export function registerKeysStuck(keys: Command, io: Io): void {
  keys
    .command("stuck")
    .description("in-flight keys whose lease expired, with where each stopped and what a retry does")
    .option("--tenant <tenant>", "only this tenant")
    .option("--workflow <name>", "only this workflow")
    .option("--older-than <duration>", "only keys created at least this long ago, e.g. 10m", parseAge)
    .option("--limit <n>", "keys per page, 1-1000", parseLimit, 50)
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .option("--all", "print every page")
    .option("--json", "one JSON object per line: the keys list fields plus reason, stoppedAt, inDoubtStep, retry")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo keys stuck
  $ idempo keys stuck --tenant acme --json | jq -r '.reason'
  $ idempo keys show acme order-1002      # the full timeline of one of them`,
    )
    .action(async (opts: StuckOptions, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const query = {
          stuck: true,
          ...(opts.tenant !== undefined ? { tenantId: opts.tenant } : {}),
          ...(opts.workflow !== undefined ? { workflow: opts.workflow } : {}),
          ...(opts.olderThan !== undefined ? { olderThanMs: opts.olderThan } : {}),
        };
        const paging = { limit: opts.limit, all: opts.all === true, ...(opts.cursor ? { cursor: opts.cursor } : {}) };
        const rows: Row[] = [];
        let count = 0;
        const { nextCursor } = await forEachKeyPage(engine, query, paging, now, async (items) => {
          for (const listed of items) {
            // listKeys carries no history; the reason needs it (one inspect per stuck key).
            const record = await engine.inspect(listed.tenantId, listed.key);
            if (record?.status !== "in_flight") continue; // finished or forgotten since the listing
            count++;
            const d = diagnose(record, now);
            const reason = stuckReason(record, d);
            if (opts.json) {
              const detail = keyDetailJson(record, d, now, { state: false, response: false });
              printJsonLines(io, [
                {
                  ...keyJson(record, now),
                  reason,
                  stoppedAt: d.stoppedAt,
                  inDoubtStep: detail.inDoubtStep,
                  retry: detail.retry,
                },
              ]);
              continue;
            }
            rows.push(
              [
                visible(record.tenantId),
                visible(record.key),
                record.workflow,
                record.recoveryPoint ?? "-",
                String(record.attempt),
                formatDuration(record.leaseRemainingMs ?? 0),
                ageLabel(record, now),
              ],
              { note: `${io.paint("red", "↳")} ${reason}\n${io.paint("dim", `  retry: ${describeRetry(record, d)}`)}` },
            );
          }
        });
        if (opts.json) {
          if (nextCursor) io.err(`more keys: add --cursor ${nextCursor}\n`);
          return;
        }
        if (count === 0) {
          io.out("no stuck keys: every in-flight key has a live lease\n");
          return;
        }
        io.out(`${plural(count, "stuck key")} (in flight, lease expired):\n\n`);
        io.out(
          renderTable(
            [
              { header: "TENANT", shrink: true },
              { header: "KEY", shrink: true },
              { header: "WORKFLOW", shrink: true },
              { header: "RECOVERY POINT", shrink: true },
              { header: "ATTEMPTS", align: "right" },
              { header: "STUCK FOR", align: "right" },
              { header: "AGE", align: "right" },
            ],
            rows,
            io.paint,
          ),
        );
        const more = nextCursor ? `next page: --cursor ${nextCursor}\n` : "";
        io.out(io.paint("dim", `\nrelease or finish them: idempo resume --workflows ./workflows.js\n${more}`));
      });
    });
}
