// The shared errors. Each relay has its own entry point, so that importing
// one does not load the client library of another:
// `@idempo/relays/amqp`, `@idempo/relays/nats`, `@idempo/relays/webhook`.
export type { UnconfirmedReason } from "./errors.js";
export { DeliveryNotConfirmedError, RelayOptionsError } from "./errors.js";
