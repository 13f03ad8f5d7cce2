/**
 * The checkout's workflow definitions, for `idempo resume --workflows`:
 *
 *   pnpm idempo resume --workflows examples/checkout/src/workflows.ts
 *
 * The module builds the checkout with the fake payment provider that the
 * stuck demo (`npm run demo -- --leave-stuck`) charged through. The provider
 * reads the journal of idempotency keys the demo left, so the resumed
 * `charge` step, called again with the same derived key, gets the charge
 * that was already made instead of a second one.
 */
import { checkoutWorkflow } from "./checkout.js";
import { PAYMENTS_JOURNAL } from "./demo-state.js";
import { FakePaymentProvider } from "./payments.js";

/** The checkout workflow (`workflow<Database>("checkout")`), charging through the demo's provider. */
export const checkout = checkoutWorkflow(new FakePaymentProvider({ journal: PAYMENTS_JOURNAL }));
