/** `idempo keys delete TENANT KEY`: forget a key, its record and its history. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { statusLabel } from "../format/key-table.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";

/** Register `keys delete` under `keys`. */
export function registerKeysDelete(keys: Command, io: Io): void {
  keys
    .command("delete")
    .description("forget a key: delete its record and history, so a reuse of the key runs again")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, deleted, workflow, status, recoveryPoint} as JSON")
    .addHelpText(
      "after",
      `
A retry with a deleted key runs the workflow from the start: effects already made
(a charge, an email) can happen again unless the downstream side deduplicates.

Examples:
  $ idempo keys delete acme order-1001
  $ idempo keys delete acme order-1001 --yes`,
    )
    .action(async (tenant: string, key: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine }) => {
        const before = await engine.inspect(tenant, key);
        if (!before) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
        const what = `${before.workflow}, ${statusLabel(before, (_s, t) => t)}, recovery point ${before.recoveryPoint ?? "none"}`;
        await confirmChange(command, io, opts.yes === true, `Delete ${tenant}/${key} (${what})?`);
        const deleted = await engine.forget(tenant, key);
        if (!deleted) throw new OperationalError(`key '${key}' in tenant '${tenant}' was already gone`);
        if (opts.json) {
          printJson(io, {
            tenantId: tenant,
            key,
            deleted: true,
            workflow: before.workflow,
            status: before.status,
            recoveryPoint: before.recoveryPoint,
          });
          return;
        }
        io.out(`deleted ${tenant}/${key} (${what}) and its history: a reuse of the key runs again\n`);
      });
    });
}
