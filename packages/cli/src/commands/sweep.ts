/** `idempo sweep [--dry-run]`: delete completed records past retention. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import type { Io } from "../io.js";
import { plural, printJson } from "../output.js";
import { startProgress } from "../progress.js";
import { parsePositiveInt } from "../usage.js";

/** Register `sweep` on the program. */
export function registerSweep(program: Command, io: Io): void {
  program
    .command("sweep")
    .description("delete completed records past retention, in short batches (in-flight records are never swept)")
    .option("--dry-run", "only count what would be deleted")
    .option("--batch-size <n>", "records per batch (one short transaction each)", parsePositiveInt, 500)
    .option("--max-batches <n>", "stop after this many batches", parsePositiveInt, 100)
    .option("--json", "print {deleted} or, with --dry-run, {wouldDelete}")
    .addHelpText(
      "after",
      `
Expired records already answer as they will once swept: 410 key_expired while
their tombstone lasts (the workflow's tombstoneMs, default 7 days), absent after
it. Sweeping turns each into its compact tombstone and deletes tombstones past
their time; it only reclaims space.

Examples:
  $ idempo sweep --dry-run
  $ idempo sweep --batch-size 1000`,
    )
    .action(
      async (opts: { dryRun?: boolean; batchSize: number; maxBatches: number; json?: boolean }, command: Command) => {
        await withDatabase(command, async ({ engine }) => {
          if (opts.dryRun) {
            const expired = (await engine.stats()).reduce((n, s) => n + s.expired, 0);
            if (opts.json) printJson(io, { wouldDelete: expired });
            else io.out(`would delete ${plural(expired, "expired record")}\n`);
            return;
          }
          // One batch per call, so progress can be shown between batches.
          const progress = startProgress(io, "sweeping…");
          let deleted = 0;
          try {
            for (let batch = 0; batch < opts.maxBatches; batch++) {
              const n = await engine.sweep({ batchSize: opts.batchSize, maxBatches: 1 });
              deleted += n;
              progress.update(`sweeping… ${deleted} deleted`);
              if (n < opts.batchSize) break;
            }
          } finally {
            progress.done();
          }
          if (opts.json) printJson(io, { deleted });
          else io.out(`deleted ${plural(deleted, "expired record")}\n`);
        });
      },
    );
}
