/** `idempo keys release TENANT KEY`: end an in-flight key's lease for good so the next retry takes over at once. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { leaseLabel } from "../format/key-table.js";
import type { Io } from "../io.js";
import { hasLiveOwner, reportVerb } from "../verb-report.js";

/** Register `keys release` under `keys`. */
export function registerKeysRelease(keys: Command, io: Io): void {
  keys
    .command("release")
    .description("end an in-flight key's lease now, so the next retry (or idempo resume) takes over at once")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, action, changed, before, after, nextRetry} as JSON")
    .addHelpText(
      "after",
      `
The lease ends for good: a live owner cannot renew it back. Its next renewal or
write fails (lease_lost) and rolls back whatever it had not committed; the next
retry resumes after the last recovery point. An already expired lease keeps its
expiry time, so "stuck for" and the order of idempo resume do not change.

Examples:
  $ idempo keys release acme order-1003
  $ idempo keys release acme order-1003 --yes --json`,
    )
    .action(async (tenant: string, key: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const before = await engine.inspect(tenant, key);
        if (!before) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
        if (before.status === "completed") {
          throw new OperationalError(
            `key '${key}' in tenant '${tenant}' is completed: only in-flight keys have a lease`,
          );
        }
        if (before.status !== "in_flight") {
          throw new OperationalError(
            `key '${key}' in tenant '${tenant}' is ${before.status}: no attempt holds a lease ` +
              "(idempo keys unpark or keys retry-from makes it takeable)",
          );
        }
        const live = hasLiveOwner(before);
        await confirmChange(
          command,
          io,
          opts.yes === true,
          `Release the lease of ${tenant}/${key} (${before.workflow}, lease ${leaseLabel(before)}${
            live ? `, held by live owner ${before.ownerToken}` : ""
          })?`,
        );
        const after = await engine.release(tenant, key);
        const owner = before.ownerToken ?? "-";
        const changed =
          `released ${tenant}/${key}: lease was ${leaseLabel(before)}, now expired (owner ${owner})` +
          (live ? `; that owner's next renewal or write fails with lease_lost and cannot renew it back` : "");
        reportVerb(io, opts.json === true, { action: "released", before, after, changed, now });
      });
    });
}
