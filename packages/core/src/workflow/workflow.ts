/** `workflow(name, options)`: where every definition starts. */
import { WorkflowDefinitionError } from "../errors.js";
import type { JsonValue } from "../json/json-value.js";
import { WORKFLOW_OPTIONS } from "../options/known-options.js";
import { MAX_STORED_MS, MAX_TIMER_MS } from "../options/limits.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import { WorkflowBuilder } from "./builder.js";
import type { WorkflowOptions } from "./definition.js";
import { checkName } from "./item-checks.js";

/**
 * Start a workflow definition. The name is stored with every run and is part
 * of the request fingerprint, so the same key used for another workflow is a
 * mismatch (422).
 *
 * @example
 * ```ts
 * const checkout = workflow<Database>('checkout', { leaseMs: 60_000, maxAttempts: 5 })
 *   .input(z.object({ cartId: z.string(), amountCents: z.number().int().positive() }))
 *   .phase('create_order', async ({ tx, input }) => {
 *     const id = `order-${input.cartId}`
 *     await tx.insertInto('orders').values({ id, cart_id: input.cartId, amount_cents: input.amountCents }).execute()
 *     return { orderId: id }
 *   })
 *   .respond(({ state }) => ({ status: 201, body: state }))
 * ```
 *
 * @param name 1-100 characters, no control characters.
 * @param options retention, lease and error policy; see {@link WorkflowOptions}.
 * @throws WorkflowDefinitionError on a bad name or error policy.
 * @throws InvalidOptionError on an unknown option (naming the known ones), one of the wrong type, or a duration or count out of range.
 */
export function workflow<DB = unknown>(
  name: string,
  options: WorkflowOptions = {},
): WorkflowBuilder<DB, JsonValue, JsonValue, Record<never, never>> {
  checkName("workflow", name);
  const where = `workflow '${name}'`;
  checkOptions(where, WORKFLOW_OPTIONS, options);
  intOption(where, "maxAttempts", options.maxAttempts, 1, 10_000);
  intOption(where, "attemptTimeoutMs", options.attemptTimeoutMs, 1, MAX_TIMER_MS);
  intOption(where, "leaseMs", options.leaseMs, 1, MAX_TIMER_MS);
  intOption(where, "lockTimeoutMs", options.lockTimeoutMs, 1, MAX_TIMER_MS);
  intOption(where, "retentionMs", options.retentionMs, 1, MAX_STORED_MS);
  intOption(where, "tombstoneMs", options.tombstoneMs, 0, MAX_STORED_MS);
  if (options.onUnknownError !== undefined && !["retry", "store"].includes(options.onUnknownError)) {
    throw new WorkflowDefinitionError(`workflow '${name}': onUnknownError must be 'retry' or 'store'`);
  }
  return new WorkflowBuilder(name, undefined, Object.freeze([]), Object.freeze({ ...options }));
}
