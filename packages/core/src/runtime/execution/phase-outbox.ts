import { LeaseLostError, UnstorableValueError, WorkflowUsageError } from "../../errors.js";
import { newId } from "../../ids.js";
import { toJsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { deriveDeliveryKey } from "../../keys/derived-key.js";
import { assertValidKey } from "../../keys/key-validation.js";
import { OUTBOX_ENQUEUE_OPTIONS } from "../../options/known-options.js";
import { checkOptions } from "../../options/option-shape.js";
import { insertMessage } from "../../store/outbox.js";
import type { Executor } from "../../store/run-store.js";
import type { Outbox } from "../../workflow/context.js";
import type { ExecutorDeps, Plan } from "./plan.js";

function takenKey(deliveryKey: string, tenantId: string): WorkflowUsageError {
  return new WorkflowUsageError(
    `outbox delivery key '${deliveryKey}' (tenant '${tenantId}') is already taken by another message; ` +
      "delivery keys must be unique per tenant: omit deliveryKey to have one derived",
  );
}

/**
 * The outbox handle of one phase transaction. Positions count from 0 on
 * every try, so a phase run again (a rollback, a takeover, `retryFrom`)
 * enqueues under the same derived keys.
 */
export function phaseOutbox(deps: ExecutorDeps, plan: Plan, phase: string, tx: Executor): Outbox {
  let position = 0;
  return {
    async enqueue(topic, payload, options = {}) {
      checkOptions("outbox.enqueue", OUTBOX_ENQUEUE_OPTIONS, options);
      assertValidKey(topic, "outbox topic");
      const converted = toJsonValue(payload);
      const where = `outbox message '${topic}' in phase '${phase}'`;
      if (!converted.ok) throw new UnstorableValueError(where, converted.issues);
      const text = JSON.stringify(converted.value);
      checkPayloadSize(`the payload of ${where}`, text, deps.maxPayloadBytes);
      const { tenantId, key, runId } = plan.own;
      const explicit = options.deliveryKey;
      if (explicit !== undefined) assertValidKey(explicit, "delivery key");
      const at = position++;
      const done = await insertMessage(tx, deps.tables, {
        tenantId,
        key,
        runId,
        runAttempt: plan.attempt,
        messageId: newId(),
        topic,
        payload: text,
        deliveryKey:
          explicit === undefined ? { derived: deriveDeliveryKey(tenantId, key, runId, phase, at) } : { explicit },
      }).catch((error: unknown) => {
        if (explicit === undefined || (error as { code?: string }).code !== "23505") throw error;
        throw takenKey(explicit, tenantId);
      });
      if (done === null) throw new LeaseLostError(tenantId, key, `outbox enqueue in phase '${phase}'`);
      // A derived key not written is this attempt's own committed message (the phase ran again): it stands.
      if (!done.inserted && explicit !== undefined) throw takenKey(explicit, tenantId);
      return done.deliveryKey;
    },
  };
}
