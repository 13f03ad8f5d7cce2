/**
 * The committed messages every relay test delivers: one checkout-like run
 * per order, whose phase enqueues one message. Only committed phases leave
 * rows, so the outbox rows are exactly the messages that must arrive.
 */
import type { Engine } from "@idempo/core";
import { workflow } from "@idempo/core";
import { z } from "zod";

export const TOPIC = "order.paid";

const orderPaid = workflow("order_paid")
  .input(z.object({ orderId: z.string() }))
  .phase("record_payment", async ({ input, outbox }) => {
    await outbox.enqueue(TOPIC, { orderId: input.orderId });
    return {};
  })
  .respond(({ input }) => ({ status: 201, body: { orderId: input.orderId } }));

/** Commit `count` runs of tenant `tenantId`, five at a time. */
export async function commitOrders(engine: Engine, tenantId: string, count: number): Promise<void> {
  const ids = Array.from({ length: count }, (_, i) => `o-${String(i).padStart(4, "0")}`);
  for (let i = 0; i < ids.length; i += 5) {
    await Promise.all(
      ids.slice(i, i + 5).map((orderId) => engine.runOnce(orderPaid, { tenantId, key: orderId, input: { orderId } })),
    );
  }
}

/** Poll `check` until it holds; fail after a generous deadline (a bound on waiting, never a verdict on speed). */
export async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
