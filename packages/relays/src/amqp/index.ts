export type { UnconfirmedReason } from "../errors.js";
export { DeliveryNotConfirmedError, RelayOptionsError } from "../errors.js";
export type { AmqpPublisher, AmqpPublisherOptions, AmqpRoute } from "./publisher.js";
export { createAmqpPublisher } from "./publisher.js";
