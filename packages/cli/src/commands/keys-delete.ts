/** `idempo keys delete TENANT KEY`: forget a key, its record and its history. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { statusLabel } from "../format/key-table.js";
import { iso } from "../format/times.js";
import { visible } from "../format/visible.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";
import { committedItems, hasLiveOwner, itemList, liveOwner } from "../verb-report.js";

/** Register `keys delete` under `keys`. */
export function registerKeysDelete(keys: Command, io: Io): void {
  keys
    .command("delete")
    .description("forget a key: delete its record and history, so a reuse of the key runs again")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--force", "delete even while a live owner holds the lease (what it committed can run twice)")
    .option(
      "--json",
      "print {tenantId, key, deleted, forced, workflow, status, recoveryPoint, ownerToken, canRepeat} as JSON",
    )
    .addHelpText(
      "after",
      `
A retry with a deleted key runs the workflow from the start: effects already made
(a charge, an email) can happen again unless the downstream side deduplicates.
A key whose lease is live is refused unless --force is given: its owner is still
working, and deleting under it lets the next call repeat every committed phase
and step. Cancel it (idempo keys cancel) to give it a final answer instead.

Examples:
  $ idempo keys delete acme order-1001
  $ idempo keys delete acme order-1001 --yes`,
    )
    .action(
      async (
        tenant: string,
        key: string,
        opts: { yes?: boolean; json?: boolean; force?: boolean },
        command: Command,
      ) => {
        await withDatabase(command, async ({ engine }) => {
          const before = await engine.inspect(tenant, key);
          if (!before) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
          if (before.status === "expired") {
            const what = `the tombstone of ${visible(tenant)}/${visible(key)} (${before.workflow}, completed ${before.outcome}, refuses the key until ${iso(before.tombstoneUntil)})`;
            await confirmChange(command, io, opts.yes === true, `Delete ${what}?`);
            await engine.forget(tenant, key);
            if (opts.json) {
              printJson(io, {
                tenantId: tenant,
                key,
                deleted: true,
                forced: false,
                workflow: before.workflow,
                status: "expired",
                recoveryPoint: null,
                ownerToken: null,
                canRepeat: [],
              });
              return;
            }
            io.out(`deleted ${what}: a reuse of the key runs the workflow again as new\n`);
            return;
          }
          const what = `${before.workflow}, ${statusLabel(before, (_s, t) => t)}, recovery point ${before.recoveryPoint ?? "none"}`;
          const live = hasLiveOwner(before);
          const repeat = itemList(committedItems(before));
          const danger = live
            ? `live ${liveOwner(before)} is still working on it: its next write fails, and the next call starts ` +
              `over and can repeat ${repeat}`
            : "";
          if (live && !opts.force) {
            throw new OperationalError(
              `refused to delete ${tenant}/${key} (${what}): ${danger}; wait for it to finish, cancel it ` +
                "(idempo keys cancel), or pass --force",
            );
          }
          await confirmChange(
            command,
            io,
            opts.yes === true,
            live ? `Delete ${tenant}/${key} (${what}) although its ${danger}?` : `Delete ${tenant}/${key} (${what})?`,
          );
          await engine.forget(tenant, key, { force: opts.force === true });
          if (opts.json) {
            printJson(io, {
              tenantId: tenant,
              key,
              deleted: true,
              forced: live,
              workflow: before.workflow,
              status: before.status,
              recoveryPoint: before.recoveryPoint,
              ownerToken: before.ownerToken,
              canRepeat: live ? committedItems(before).map((i) => `${i.kind}:${i.name}`) : [],
            });
            return;
          }
          io.out(`deleted ${tenant}/${key} (${what}) and its history: a reuse of the key runs again\n`);
          if (live) io.out(`forced past a live owner: the next call can repeat ${repeat}\n`);
        });
      },
    );
}
