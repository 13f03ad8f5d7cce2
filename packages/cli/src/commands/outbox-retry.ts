/** `idempo outbox retry TENANT MESSAGE_ID`: put a dead or failing message back in line now. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { OperationalError } from "../errors.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";

/** Register `outbox retry` under `outbox`. */
export function registerOutboxRetry(outbox: Command, io: Io): void {
  outbox
    .command("retry")
    .description("requeue a dead or failing message now, with a fresh attempt budget")
    .argument("<tenant>", "the tenant the message belongs to")
    .argument("<message-id>", "the message id (see outbox list)")
    .option("--json", "print {tenantId, messageId, requeued} as JSON")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo outbox retry acme 01J9Z3Q6W8K2M4N6P8R0S2T4V6`,
    )
    .action(async (tenant: string, messageId: string, opts: { json?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine }) => {
        const requeued = await engine.retryOutbox(tenant, messageId);
        if (!requeued)
          throw new OperationalError(
            `no message '${messageId}' to requeue in tenant '${tenant}' (delivered, or unknown)`,
          );
        if (opts.json) printJson(io, { tenantId: tenant, messageId, requeued });
        else io.out(`requeued ${tenant}/${messageId}: the relay delivers it on its next round\n`);
      });
    });
}
