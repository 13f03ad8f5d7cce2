/** `idempo keys cancel TENANT KEY`: finish a run that cannot (or must not) finish with a stored answer. */
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { confirmChange } from "../confirm.js";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import { statusLabel } from "../format/key-table.js";
import { runOf } from "../format/tombstone.js";
import type { Io } from "../io.js";
import { hasLiveOwner, liveOwner, reportVerb } from "../verb-report.js";

interface CancelOptions {
  status?: number;
  body?: unknown;
  yes?: boolean;
  json?: boolean;
}

function parseStatus(value: string): number {
  const n = Number(value);
  if (!/^\d{3}$/.test(value) || n < 100 || n > 599) throw new InvalidArgumentError("must be an HTTP status 100-599");
  return n;
}

function parseBody(value: string): unknown {
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new InvalidArgumentError('must be JSON, e.g. \'{"reason":"duplicate order"}\'');
  }
}

/** Register `keys cancel` under `keys`. */
export function registerKeysCancel(keys: Command, io: Io): void {
  keys
    .command("cancel")
    .description("finish an in-flight, parked or suspended run now with a stored answer (default 409 run_canceled)")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("--status <code>", "HTTP status of the stored answer, 100-599 (default 409)", parseStatus)
    .option("--body <json>", "body of the stored answer, as JSON (default: a run_canceled problem body)", parseBody)
    .option("-y, --yes", "do not ask for confirmation (required when not on a terminal)")
    .option("--json", "print {tenantId, key, action, changed, before, after, nextRetry} as JSON")
    .addHelpText(
      "after",
      `
Every later call with the key gets the stored answer (outcome canceled). A live
owner finds out at its next renewal or write: its signal aborts and what it had
not committed rolls back. Committed phases, recorded steps and queued outbox
messages stay: cancel stops a run, it does not undo it.

Examples:
  $ idempo keys cancel acme order-1003
  $ idempo keys cancel acme order-1003 --status 410 --body '{"reason":"order withdrawn"}' --yes`,
    )
    .action(async (tenant: string, key: string, opts: CancelOptions, command: Command) => {
      await withDatabase(command, async ({ engine, now }) => {
        const found = await engine.inspect(tenant, key);
        if (!found) throw new OperationalError(`no record for key '${key}' in tenant '${tenant}'`);
        const before = runOf(found, "cancel");
        if (before.status === "completed") {
          throw new OperationalError(
            `key '${key}' in tenant '${tenant}' is already completed (${before.response?.outcome ?? "?"}, ` +
              `${before.response?.status ?? "?"}): nothing to cancel, its stored response is replayed`,
          );
        }
        const live = hasLiveOwner(before);
        const was = `${statusLabel(before, (_s, t) => t)} at recovery point ${before.recoveryPoint ?? "none"}`;
        await confirmChange(
          command,
          io,
          opts.yes === true,
          `Cancel ${tenant}/${key} (${before.workflow}, ${was}${live ? `, ${liveOwner(before)}` : ""})?`,
        );
        const after = await engine.cancel(tenant, key, {
          ...(opts.status !== undefined ? { status: opts.status } : {}),
          ...(opts.body !== undefined ? { body: opts.body } : {}),
        });
        const changed =
          `canceled ${tenant}/${key} (was ${was}): stored ${after.response?.status ?? "?"} as its final answer` +
          (live ? `; live owner ${before.ownerToken} fails at its next renewal or write` : "") +
          `; what it committed (up to ${before.recoveryPoint ?? "nothing"}) stays`;
        reportVerb(io, opts.json === true, { action: "canceled", before, after, changed, now });
      });
    });
}
