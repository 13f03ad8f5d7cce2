/** `idempo keys release TENANT KEY`: expire an in-flight key's lease now so the next retry takes over. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { describeRetry, diagnose } from "../format/diagnosis.js";
import { leaseLabel } from "../format/key-table.js";
import { TABLE_WIDTH } from "../format/table.js";
import { wrap } from "../format/wrap.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";

/** Register `keys release` under `keys`. */
export function registerKeysRelease(keys: Command, io: Io): void {
  keys
    .command("release")
    .description("expire an in-flight key's lease now, so the next retry (or idempo resume) takes over at once")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, released, before, after} as JSON")
    .addHelpText(
      "after",
      `
Use it on a run whose process crashed: a live owner's heartbeat may renew the lease again.

Examples:
  $ idempo keys release acme order-1003
  $ idempo keys release acme order-1003 --yes --json`,
    )
    .action(async (tenant: string, key: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const before = await engine.inspect(tenant, key);
        if (!before) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
        if (before.status !== "in_flight") {
          throw new OperationalError(
            `key '${key}' in tenant '${tenant}' is completed: only in-flight keys have a lease`,
          );
        }
        await confirmChange(
          command,
          io,
          opts.yes === true,
          `Release the lease of ${tenant}/${key} (${before.workflow}, lease ${leaseLabel(before)})?`,
        );
        const released = await engine.release(tenant, key);
        if (!released) throw new OperationalError(`key '${key}' in tenant '${tenant}' finished or vanished meanwhile`);
        const after = await engine.inspect(tenant, key);
        const retry = after ? describeRetry(after, diagnose(after, now)) : "run from the start";
        if (opts.json) {
          printJson(io, {
            tenantId: tenant,
            key,
            released: true,
            before: { leaseRemainingMs: before.leaseRemainingMs, ownerToken: before.ownerToken },
            after: { leaseRemainingMs: after?.leaseRemainingMs ?? null, recoveryPoint: after?.recoveryPoint ?? null },
          });
          return;
        }
        io.out(
          `released ${tenant}/${key}: lease was ${leaseLabel(before)}, now expired (owner ${before.ownerToken ?? "-"})\n`,
        );
        io.out(`${wrap(`a retry now will ${retry}`, TABLE_WIDTH, "", "  ").join("\n")}\n`);
      });
    });
}
