export type { UnconfirmedReason } from "../errors.js";
export { DeliveryNotConfirmedError, RelayOptionsError } from "../errors.js";
export type { JetStreamPublisher, JetStreamPublisherOptions } from "./publisher.js";
export { createJetStreamPublisher, MSG_ID_HEADER } from "./publisher.js";
