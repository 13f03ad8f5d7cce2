/**
 * @idempo/http: the Idempotency-Key header on top of the idempo engine.
 * The framework adapters live in `@idempo/http/express`,
 * `@idempo/http/fastify`, `@idempo/http/hono` and `@idempo/http/fetch` (a
 * standard Request/Response handler); this entry holds what
 * they share: header parsing, the problem table, errors and option types.
 */
export { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from "./header/idempotency-key.js";
export {
  IdempotencyKeyMissingError,
  InvalidRequestBodyError,
  ReplayNotAcceptableError,
  RequestBodyTooLargeError,
  WebhookVerificationError,
} from "./problem/errors.js";
export { PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_PREFIX, problemReply } from "./problem/problem.js";
export { DEFAULT_REPLAY_HEADERS } from "./response/envelope.js";
export type { HttpReply } from "./response/reply.js";
export { REPLAYED_HEADER } from "./response/reply.js";
export type { CommonOptions, IdempotencyOptions, IdempotentOptions, TenantResolver } from "./runtime/options.js";
export type {
  UndeliveredReason,
  UndeliveredSignal,
  VerifiedWebhookEvent,
  WebhookEvent,
  WebhookOptions,
  WebhookSignal,
} from "./runtime/webhook-route.js";
export type { HandlerRun } from "./runtime/wrapped-run.js";
