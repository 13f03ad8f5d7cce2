#!/usr/bin/env node
// `npm run demo`: set up (pnpm + locked install), then run the checkout example, then the
// 3-D Secure checkout (a run that waits for a provider's webhook), then the subscription
// renewals (monthly schedules, three months simulated with the test clock), then the
// marketplace payout (a `.map` over an order's sellers under a per-merchant concurrency limit
// and the provider's rate limit). With --leave-stuck, only the checkout example, which then
// leaves stuck runs for the CLI instead of its story.
import { log, run, setUp } from "./bootstrap.mjs";

setUp();
const extra = process.argv.slice(2);
const demos = extra.includes("--leave-stuck")
  ? ["@idempo/example-checkout"]
  : [
      "@idempo/example-checkout",
      "@idempo/example-checkout-3ds",
      "@idempo/example-subscription-renewal",
      "@idempo/example-marketplace-payout",
    ];
let status = 0;
for (const name of demos) {
  const args = ["--filter", name, "start", ...extra];
  log(`pnpm ${args.join(" ")}`);
  status = run("pnpm", args);
  if (status !== 0) break;
}
process.exit(status);
