/**
 * The behaviour every adapter must show, written once and run against each
 * adapter's real server on loopback: header handling, tenant scoping, the
 * request fingerprint, the status-code table, bodies, and concurrency.
 * Counts come from the handlers' own effects and from idempo's table.
 */

import { bodyBehaviour } from "./behaviour/bodies.ts";
import { concurrencyBehaviour } from "./behaviour/concurrency.ts";
import { useBehaviourContext } from "./behaviour/context.ts";
import { fingerprintBehaviour } from "./behaviour/fingerprint.ts";
import { keyHeaderBehaviour } from "./behaviour/key-header.ts";
import { requestLimitBehaviour } from "./behaviour/request-limits.ts";
import { statusCodeBehaviour } from "./behaviour/status-codes.ts";
import { tenantBehaviour } from "./behaviour/tenants.ts";
import { unstoredAnswerBehaviour } from "./behaviour/unstored-answers.ts";
import type { Harness } from "./routes.ts";

/** Every group of the suite, each in its own file under `behaviour/`, against one adapter. */
export function behaviourSuite(harness: Harness): void {
  const ctx = useBehaviourContext(harness);
  keyHeaderBehaviour(harness, ctx);
  tenantBehaviour(harness, ctx);
  fingerprintBehaviour(harness, ctx);
  statusCodeBehaviour(harness, ctx);
  bodyBehaviour(harness, ctx);
  requestLimitBehaviour(harness, ctx);
  unstoredAnswerBehaviour(harness, ctx);
  concurrencyBehaviour(harness, ctx);
}
