/** The demo's orders: two merchant accounts, twelve sellers' shares. */
import type { Order } from "./marketplace-tables.js";

/** The marketplace's tenant. */
export const TENANT = "marketplace";

/**
 * Three orders. `sel_lost`'s transfer loses its answer the first time (see
 * the provider): the step asks again with the same key.
 */
export const ORDERS: readonly Order[] = [
  {
    id: "ord_1001",
    merchantId: "m_books",
    lines: [
      { sellerId: "sel_ada", amountCents: 1_200 },
      { sellerId: "sel_bo", amountCents: 800 },
      { sellerId: "sel_cy", amountCents: 1_500 },
      { sellerId: "sel_lost", amountCents: 600 },
    ],
  },
  {
    id: "ord_1002",
    merchantId: "m_books",
    lines: [
      { sellerId: "sel_ada", amountCents: 400 },
      { sellerId: "sel_dee", amountCents: 2_500 },
      { sellerId: "sel_eli", amountCents: 900 },
    ],
  },
  {
    id: "ord_1003",
    merchantId: "m_garden",
    lines: [
      { sellerId: "sel_fay", amountCents: 3_000 },
      { sellerId: "sel_gus", amountCents: 700 },
      { sellerId: "sel_hal", amountCents: 1_100 },
      { sellerId: "sel_ivy", amountCents: 450 },
      { sellerId: "sel_jo", amountCents: 1_250 },
    ],
  },
];

/** The key of an order's payout run. */
export const payoutKey = (orderId: string) => `payout:${orderId}`;

/** Every line's cents, summed. */
export const totalCents = (orders: readonly Order[]) =>
  orders.reduce((sum, o) => sum + o.lines.reduce((s, l) => s + l.amountCents, 0), 0);
