import { idempotent } from "@idempo/http/fetch";
import { checkout } from "../../../lib/checkout";
import { accountOf, engineOf } from "../../../lib/engine";

// The engine needs Node (pg, node:crypto): not the Edge runtime.
export const runtime = "nodejs";

export const POST = idempotent(engineOf(), checkout, {
  tenant: accountOf,
  input: async (request) => (await request.json()) as { cartId: string; amountCents: number },
});
