import { InvalidIdempotencyKeyError } from "@idempo/core";
import type { TenantResolver } from "../runtime/options.js";

/**
 * The request's tenant, from the application's resolver. A missing or
 * empty tenant is refused (400 `invalid_key`) rather than mapped to a
 * shared bucket; the engine applies the remaining key rules before any SQL.
 */
export async function resolveTenant<Req>(resolver: TenantResolver<Req>, request: Req): Promise<string> {
  const tenant: unknown = await resolver(request);
  if (typeof tenant !== "string" || tenant.length === 0) {
    throw new InvalidIdempotencyKeyError(
      "no tenant for this request: the tenant resolver returned nothing, so the key has no scope (is the request authenticated?)",
    );
  }
  return tenant;
}
