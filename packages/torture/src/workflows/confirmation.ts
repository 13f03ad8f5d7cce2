/**
 * The durable scenario's workflow, a 3-D Secure-like payment: authorise
 * (an effect), sleep a little (so workers are killed while runs sleep),
 * wait for the provider's confirmation signal, then capture (an effect
 * that records the payload it saw). Every effect is a row in the ledger,
 * written in the phase's transaction, so a phase that commits twice, or a
 * signal merged twice or not at all, shows in the counts.
 */
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import { logEffect } from "./effects.ts";

/** The workflow's name in the ledger. */
const CONFIRMATION = "confirmation";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the provider's webhook carries: which intent it confirms, and a nonce per intent. */
const confirmationPayload = z.object({ intent: z.string(), nonce: z.string() });

/**
 * The workflow; `sleepMs` comes from the input, so the driver decides how
 * long each run sleeps (bounded: the scenario waits for every run).
 */
export const confirmationWorkflow = workflow(CONFIRMATION, { maxAttempts: 50 })
  .input(z.object({ intent: z.string(), sleepMs: z.number().int().min(0).max(60_000) }))
  .phase("authorise", async ({ tx, ...run }) => {
    await logEffect(tx, run, CONFIRMATION, "authorise");
    // Work that takes a moment, with the transaction open: a worker killed now loses it to a takeover.
    await pause(20 + Math.random() * 120);
    return { authorised: run.input.intent };
  })
  .sleep("settle", ({ input }) => input.sleepMs)
  .waitFor("confirmed", { schema: confirmationPayload })
  .phase("capture", async ({ tx, state, ...run }) => {
    await logEffect(tx, run, CONFIRMATION, "capture");
    await pause(20 + Math.random() * 120);
    await sql`INSERT INTO shop.captures (tenant_id, key, nonce) VALUES (${run.tenantId}, ${run.key}, ${state.confirmed.nonce})`.execute(
      tx,
    );
    return { captured: true };
  })
  .accepted(({ input }) => ({ pending: input.intent }))
  .respond(({ state }) => ({ status: 201, body: { nonce: state.confirmed.nonce, captured: state.captured } }));

/**
 * The same workflow as a version 2 that does not replace version 1: a
 * process that knows only it must refuse (and not store) a signal for a
 * version-1 run, since it cannot check the payload against that run's schema.
 */
export const confirmationV2Workflow = workflow(CONFIRMATION, { maxAttempts: 50 })
  .version(2)
  .input(z.object({ intent: z.string(), sleepMs: z.number().int().min(0).max(60_000) }))
  .waitFor("confirmed", { schema: z.object({ intent: z.string(), nonce: z.string(), v2: z.literal(true).optional() }) })
  .respond(({ state }) => ({ status: 201, body: { nonce: state.confirmed.nonce } }));
