/**
 * The durable scenario's workflow, a 3-D Secure-like payment: authorise
 * (an effect), sleep a little (so workers are killed while runs sleep),
 * tell the shop the payment is pending (a phase that enqueues an outbox
 * message), wait for the provider's confirmation signal, then capture (an
 * effect that records the payload it saw). Every effect is a row in the
 * ledger, written in the phase's transaction, so a phase that commits
 * twice, or a signal merged twice or not at all, shows in the counts; the
 * message is counted where it arrives, by delivery key.
 */
import type { WorkflowOptions } from "@idempo/core";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import { logEffect } from "./effects.ts";

/** The topic of the message the `notify` phase enqueues. */
export const PAYMENT_PENDING = "payment.pending";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the provider's webhook carries: which intent it confirms, and a nonce per intent. */
const confirmationPayload = z.object({ intent: z.string(), nonce: z.string() });

/** The payment under a name and with options of its own; the phases write the name into the ledger. */
function confirmationFlow(name: string, options: WorkflowOptions) {
  return workflow(name, { maxAttempts: 50, ...options })
    .input(z.object({ intent: z.string(), sleepMs: z.number().int().min(0).max(60_000) }))
    .phase("authorise", async ({ tx, ...run }) => {
      await logEffect(tx, run, name, "authorise");
      // Work that takes a moment, with the transaction open: a worker killed now loses it to a takeover.
      await pause(20 + Math.random() * 120);
      return { authorised: run.input.intent };
    })
    .sleep("settle", ({ input }) => input.sleepMs)
    .phase("notify", async ({ tx, outbox, state, ...run }) => {
      await logEffect(tx, run, name, "notify");
      // The message is the same on every run of the phase: one logical message per intent.
      await outbox.enqueue(PAYMENT_PENDING, { intent: run.input.intent, authorised: state.authorised });
      return {};
    })
    .waitFor("confirmed", { schema: confirmationPayload })
    .phase("capture", async ({ tx, state, ...run }) => {
      await logEffect(tx, run, name, "capture");
      await pause(20 + Math.random() * 120);
      await sql`INSERT INTO shop.captures (tenant_id, key, nonce) VALUES (${run.tenantId}, ${run.key}, ${state.confirmed.nonce})`.execute(
        tx,
      );
      return { captured: true };
    })
    .accepted(({ input }) => ({ pending: input.intent }))
    .respond(({ state }) => ({ status: 201, body: { nonce: state.confirmed.nonce, captured: state.captured } }));
}

/**
 * The workflow; `sleepMs` comes from the input, so the driver decides how
 * long each run sleeps (bounded: the scenario waits for every run).
 */
export const confirmationWorkflow = confirmationFlow("confirmation", {});

/**
 * The same payment with a retention of one second (and the default week
 * of tombstone): its records expire and are swept into tombstones while
 * the scenario still retries their keys and repeats their signals.
 */
export const briefConfirmationWorkflow = confirmationFlow("confirmation_brief", { retentionMs: 1_000 });

/**
 * The same workflow as a version 2 that does not replace version 1: a
 * process that knows only it must refuse (and not store) a signal for a
 * version-1 run, since it cannot check the payload against that run's schema.
 */
export const confirmationV2Workflow = workflow("confirmation", { maxAttempts: 50 })
  .version(2)
  .input(z.object({ intent: z.string(), sleepMs: z.number().int().min(0).max(60_000) }))
  .waitFor("confirmed", { schema: z.object({ intent: z.string(), nonce: z.string(), v2: z.literal(true).optional() }) })
  .respond(({ state }) => ({ status: 201, body: { nonce: state.confirmed.nonce } }));
