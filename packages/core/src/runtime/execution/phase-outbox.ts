import { LeaseLostError, UnstorableValueError, WorkflowUsageError } from "../../errors.js";
import { newId } from "../../ids.js";
import { toJsonValue } from "../../json/json-value.js";
import { deriveDeliveryKey } from "../../keys/derived-key.js";
import { assertValidKey } from "../../keys/key-validation.js";
import { insertMessage } from "../../store/outbox.js";
import type { Executor } from "../../store/run-store.js";
import type { Outbox } from "../../workflow/context.js";
import type { ExecutorDeps, Plan } from "./plan.js";

/** The outbox handle of one phase transaction; positions count from 0 on every try. */
export function phaseOutbox(deps: ExecutorDeps, plan: Plan, phase: string, tx: Executor): Outbox {
  let position = 0;
  return {
    async enqueue(topic, payload, options = {}) {
      assertValidKey(topic, "outbox topic");
      const converted = toJsonValue(payload);
      if (!converted.ok)
        throw new UnstorableValueError(`outbox message '${topic}' in phase '${phase}'`, converted.issues);
      const { tenantId, key, runId } = plan.own;
      const deliveryKey = options.deliveryKey ?? deriveDeliveryKey(tenantId, key, runId, plan.attempt, phase, position);
      position++;
      assertValidKey(deliveryKey, "delivery key");
      const inserted = insertMessage(tx, deps.tables, {
        tenantId,
        key,
        runId,
        messageId: newId(),
        topic,
        payload: JSON.stringify(converted.value),
        deliveryKey,
      });
      await inserted.catch((error: unknown) => {
        if ((error as { code?: string }).code !== "23505") throw error;
        // A derived key is unique to this run, attempt, phase and position: a
        // collision means this attempt's own earlier try committed it, which a
        // fenced commit makes impossible unless the lease was lost meanwhile.
        if (options.deliveryKey === undefined)
          throw new LeaseLostError(tenantId, key, `outbox enqueue in phase '${phase}'`);
        throw new WorkflowUsageError(
          `outbox delivery key '${deliveryKey}' (tenant '${tenantId}') is already taken by another message; ` +
            "delivery keys must be unique per tenant: omit deliveryKey to have one derived " +
            "(or this attempt lost its lease and another one already committed this phase)",
        );
      });
      return deliveryKey;
    },
  };
}
