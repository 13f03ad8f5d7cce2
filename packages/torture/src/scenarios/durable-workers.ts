/** The worker processes of the durable scenario: started from their own entry file, in this package's directory. */
import { fileURLToPath } from "node:url";
import { ProcessFleet } from "./process-fleet.ts";

const WORKER_ENTRY = fileURLToPath(new URL("../durable-worker-main.ts", import.meta.url));

/** The worker processes of one durable run, each delivering outbox messages to `receiver`. */
export class DurableFleet extends ProcessFleet {
  constructor(url: string, leaseMs: number, receiver: { readonly url: string; readonly secret: string }) {
    super(WORKER_ENTRY, [url, String(leaseMs), receiver.url, receiver.secret]);
  }
}
