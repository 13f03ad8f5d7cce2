/** `idempo keys unpark TENANT KEY`: make a parked run takeable again once its cause is fixed. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import type { Io } from "../io.js";
import { reportVerb } from "../verb-report.js";

/** Register `keys unpark` under `keys`. */
export function registerKeysUnpark(keys: Command, io: Io): void {
  keys
    .command("unpark")
    .description("make a parked run takeable again, with a fresh attempt budget, after its cause was fixed")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, action, changed, before, after, nextRetry} as JSON")
    .addHelpText(
      "after",
      `
Deploy the fix first: an unparked run resumes after its recovery point with the
code that runs now, and parks again if it fails the same way maxAttempts times.

Examples:
  $ idempo keys parked
  $ idempo keys unpark acme order-1002 --yes`,
    )
    .action(async (tenant: string, key: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const before = await engine.inspect(tenant, key);
        if (!before) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
        if (before.status !== "parked") {
          throw new OperationalError(`key '${key}' in tenant '${tenant}' is ${before.status}, not parked`);
        }
        await confirmChange(
          command,
          io,
          opts.yes === true,
          `Unpark ${tenant}/${key} (${before.workflow}, parked: ${before.parkedReason ?? "?"})?`,
        );
        const after = await engine.unpark(tenant, key);
        const changed =
          `unparked ${tenant}/${key} (was parked after ${before.attempt} attempts: ${before.parkedReason ?? "?"}): ` +
          "takeable now, with a fresh attempt budget";
        reportVerb(io, opts.json === true, { action: "unparked", before, after, changed, now });
      });
    });
}
