/** The operator half of the engine (used by the `idempo` CLI): stats, outbox, migrations. */
import { InputValidationError } from "../../errors.js";
import { assertValidKey } from "../../keys/key-validation.js";
import { LIST_OUTBOX_OPTIONS } from "../../options/known-options.js";
import { checkOptions } from "../../options/option-shape.js";
import { requeueMessage, selectOutbox, selectStats } from "../../store/admin.js";
import { pendingMigrations } from "../../store/migrate.js";
import type { Executor, RunStatus, Tables } from "../../store/run-store.js";

/** Record counts of one workflow and status. */
export interface WorkflowStats {
  readonly workflow: string;
  readonly status: RunStatus;
  readonly records: number;
  /** In flight with an expired lease (DB clock). */
  readonly stuck: number;
  /** Completed and past retention, waiting for the sweeper. */
  readonly expired: number;
  readonly oldestCreatedAt: Date | null;
}

/** One outbox message as operators see it. */
export interface OutboxEntry {
  readonly tenantId: string;
  readonly messageId: string;
  readonly key: string;
  readonly topic: string;
  readonly deliveryKey: string;
  readonly status: "pending" | "delivered" | "dead";
  readonly attempts: number;
  readonly availableAt: Date;
  readonly lastError: string | null;
  readonly createdAt: Date;
  readonly deliveredAt: Date | null;
}

/** Filters of `listOutbox`. */
export interface ListOutboxOptions {
  tenantId?: string;
  status?: "pending" | "delivered" | "dead";
  topic?: string;
  /** 1-1000 (Default: 50). */
  limit?: number;
}

/** Operator methods of an engine. */
export interface AdminApi {
  /** Counts by workflow and status, with stuck and expired counts. */
  stats(): Promise<WorkflowStats[]>;
  /** Outbox messages, newest first. */
  listOutbox(options?: ListOutboxOptions): Promise<OutboxEntry[]>;
  /** Put a dead or failing message back in line now with a fresh attempt budget. @returns true when requeued. */
  retryOutbox(tenantId: string, messageId: string): Promise<boolean>;
  /** SQL migrations not yet applied, in order: `{ name, sql }`. */
  pendingMigrations(): Promise<{ name: string; sql: string }[]>;
}

export function adminApi(db: Executor, tables: Tables): AdminApi {
  return {
    async stats() {
      return (await selectStats(db, tables)).map((r) => ({
        workflow: r.workflow,
        status: r.status,
        records: r.records,
        stuck: r.stuck,
        expired: r.expired,
        oldestCreatedAt: r.oldest_created_at,
      }));
    },
    async listOutbox(opts = {}) {
      checkOptions("listOutbox", LIST_OUTBOX_OPTIONS, opts);
      const limit = opts.limit ?? 50;
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
        throw new InputValidationError([{ path: "limit", message: "must be an integer from 1 to 1000" }]);
      }
      if (opts.tenantId !== undefined) assertValidKey(opts.tenantId, "tenant id");
      if (opts.topic !== undefined) assertValidKey(opts.topic, "outbox topic");
      if (opts.status !== undefined && !["pending", "delivered", "dead"].includes(opts.status)) {
        throw new InputValidationError([{ path: "status", message: "must be 'pending', 'delivered' or 'dead'" }]);
      }
      const rows = await selectOutbox(db, tables, {
        tenantId: opts.tenantId,
        status: opts.status,
        topic: opts.topic,
        limit,
      });
      return rows.map((r) => ({
        tenantId: r.tenant_id,
        messageId: r.message_id,
        key: r.key,
        topic: r.topic,
        deliveryKey: r.delivery_key,
        status: r.status,
        attempts: r.attempts,
        availableAt: r.available_at,
        lastError: r.last_error,
        createdAt: r.created_at,
        deliveredAt: r.delivered_at,
      }));
    },
    retryOutbox(tenantId, messageId) {
      assertValidKey(tenantId, "tenant id");
      assertValidKey(messageId, "message id");
      return requeueMessage(db, tables, tenantId, messageId);
    },
    async pendingMigrations() {
      return (await pendingMigrations(db, tables)).map((m) => ({ name: m.name, sql: m.sql }));
    },
  };
}
