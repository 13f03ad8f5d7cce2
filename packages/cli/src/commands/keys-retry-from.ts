/** `idempo keys retry-from TENANT KEY ITEM`: run an item and everything after it again on the next takeover. */
import type { Command } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { definitionItems } from "../format/run-items.js";
import { runOf } from "../format/tombstone.js";
import type { Io } from "../io.js";
import { reportVerb } from "../verb-report.js";

/** Register `keys retry-from` under `keys`. */
export function registerKeysRetryFrom(keys: Command, io: Io): void {
  keys
    .command("retry-from")
    .description("move a run's recovery point back so that ITEM and everything after it run again")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .argument("<item>", "the phase or step to run again (see idempo keys show)")
    .option("--resend-outbox", "give the outbox messages of the phases that run again new delivery keys")
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, action, changed, before, after, nextRetry} as JSON")
    .addHelpText(
      "after",
      `
Only for a run no one owns: stuck (lease expired), parked (also unparked with a
fresh attempt budget) or suspended. State stays as committed; the items that run
again replace what they returned. A step that runs again is called with the same
derived key, so a provider that deduplicates on it answers with its first result.
Phases run again in new transactions: their writes happen again unless they are
idempotent themselves. Their outbox messages are enqueued again under the
delivery keys of their first run, so a receiver that deduplicates on the key
drops them; --resend-outbox gives them new keys, and receivers act on them again.

Examples:
  $ idempo keys retry-from acme order-1002 charge
  $ idempo keys retry-from acme order-1002 create_order --yes --json
  $ idempo keys retry-from acme order-1002 send_receipt --resend-outbox`,
    )
    .action(
      async (
        tenant: string,
        key: string,
        item: string,
        opts: { yes?: boolean; json?: boolean; resendOutbox?: boolean },
        command: Command,
      ) => {
        await withDatabase(command, async ({ engine, now }) => {
          const found = await engine.inspect(tenant, key);
          if (!found) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
          const before = runOf(found, "retry");
          const items = definitionItems(before);
          const at = items.findIndex((i) => i.name === item);
          if (at < 0) {
            throw new OperationalError(
              `'${item}' is not a phase or step of ${before.workflow} (items: ${items.map((i) => i.name).join(", ")})`,
            );
          }
          const again = items
            .slice(
              at,
              (before.recoveryPoint === null ? -1 : items.findIndex((i) => i.name === before.recoveryPoint)) + 1,
            )
            .map((i) => `${i.kind} ${i.name}`)
            .join(", ");
          await confirmChange(
            command,
            io,
            opts.yes === true,
            `Move ${tenant}/${key} back from recovery point ${before.recoveryPoint ?? "none"} so that ${again || item} run again` +
              `${opts.resendOutbox === true ? ", their outbox messages under new delivery keys" : ""}?`,
          );
          const after = await engine.retryFrom(tenant, key, item, { resendOutbox: opts.resendOutbox === true });
          const changed =
            `moved ${tenant}/${key} back from recovery point ${before.recoveryPoint ?? "none"} to ` +
            `${after.recoveryPoint ?? "the start"}: ${again} will run again` +
            (before.status === "parked" ? "; unparked with a fresh attempt budget" : "") +
            (opts.resendOutbox === true ? "; their outbox messages get new delivery keys" : "");
          reportVerb(io, opts.json === true, { action: "retried_from", before, after, changed, now });
        });
      },
    );
}
