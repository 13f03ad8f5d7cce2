import type { Engine, RunResult } from "@idempo/core";
import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Database } from "./database.js";
import type { Message } from "./queue.js";

/** How long idempo remembers a handled message id. Tiny, so the demo can outlive it; production: hours or days. */
export const RETENTION_MS = 300;

/** The tenant all messages of this demo belong to. */
export const TENANT = "shop-1";

/** An order event as the publisher sends it. */
const orderEvent = z.object({
  orderId: z.string().min(1),
  type: z.enum(["order.placed", "order.paid", "order.shipped"]),
  amountCents: z.number().int().nonnegative(),
});

/** The message body type. */
export type OrderEvent = z.input<typeof orderEvent>;

/**
 * Apply one order event to the ledger, once per message id. The phase inserts
 * with `ON CONFLICT (order_id, event_type) DO NOTHING`, so a copy of an event
 * that reaches it anyway (a replay after retention, or a publisher that sent
 * the event twice under two message ids) adds no row; `applied` says which.
 */
export const applyOrderEvent = workflow<Database>("apply_order_event", { retentionMs: RETENTION_MS })
  .input(orderEvent)
  .phase("record_in_ledger", async ({ tx, input, key }) => {
    const inserted = await tx
      .insertInto("ledger")
      .values({ order_id: input.orderId, event_type: input.type, amount_cents: input.amountCents, message_id: key })
      .onConflict((oc) => oc.columns(["order_id", "event_type"]).doNothing())
      .returning("id")
      .executeTakeFirst();
    return { applied: inserted !== undefined };
  })
  .respond(({ input, state }) => ({
    status: 200,
    body: { orderId: input.orderId, type: input.type, applied: state.applied },
  }));

/** What handling one delivery returns: the run's response. */
export type HandleResult = RunResult<{ orderId: string; type: string; applied: boolean }>;

/**
 * Handle one delivered message: the message id is the idempotency key, the
 * body the input. A redelivery within retention is answered from the stored
 * response without running the phase again.
 */
export function handleMessage(engine: Engine, message: Message<OrderEvent>): Promise<HandleResult> {
  return engine.runOnce(applyOrderEvent, { tenantId: TENANT, key: message.id, input: message.body });
}
