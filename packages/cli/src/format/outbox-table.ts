/** Outbox messages as a table and as JSON. */
import type { OutboxEntry } from "@idempo/core";
import type { Paint } from "./colour.js";
import type { Row } from "./table.js";
import { renderTable } from "./table.js";
import { iso } from "./times.js";
import { visible } from "./visible.js";

/** The `--json` shape of one outbox message (times as ISO strings). */
export function outboxJson(m: OutboxEntry): Record<string, unknown> {
  return {
    tenantId: m.tenantId,
    messageId: m.messageId,
    key: m.key,
    topic: m.topic,
    deliveryKey: m.deliveryKey,
    status: m.status,
    attempts: m.attempts,
    availableAt: m.availableAt.toISOString(),
    lastError: m.lastError,
    createdAt: m.createdAt.toISOString(),
    deliveredAt: m.deliveredAt ? m.deliveredAt.toISOString() : null,
  };
}

function statusCell(m: OutboxEntry, paint: Paint): string {
  if (m.status === "dead") return paint("red", "dead");
  if (m.status === "delivered") return paint("green", "delivered");
  return paint("yellow", "pending");
}

/** Render messages newest first; a message's last error goes on a line under it. */
export function outboxTable(messages: readonly OutboxEntry[], paint: Paint): string {
  const rows: Row[] = messages.flatMap((m): Row[] => {
    const row: Row = [
      visible(m.tenantId),
      m.messageId,
      visible(m.key),
      m.topic,
      statusCell(m, paint),
      String(m.attempts),
      iso(m.createdAt),
    ];
    return m.lastError ? [row, { note: paint("red", `last error: ${m.lastError}`) }] : [row];
  });
  return renderTable(
    [
      { header: "TENANT", shrink: true },
      // Never cut: `idempo outbox retry TENANT MESSAGE_ID` needs the id whole.
      { header: "MESSAGE" },
      { header: "KEY", shrink: true },
      { header: "TOPIC", shrink: true },
      { header: "STATUS" },
      { header: "ATTEMPTS", align: "right" },
      { header: "CREATED (UTC)" },
    ],
    rows,
    paint,
  );
}
