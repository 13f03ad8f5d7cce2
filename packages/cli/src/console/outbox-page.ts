/** The outbox: messages waiting for delivery and dead letters, with a requeue button for each. */
import type { OutboxEntry } from "@idempo/core";
import { html } from "hono/html";
import { iso } from "../format/times.js";
import { visible } from "../format/visible.js";
import { badge } from "./layout.js";
import { outboxRetryPath, runPath } from "./paths.js";

function rows(entries: readonly OutboxEntry[], actions: boolean) {
  if (entries.length === 0) return html`<p>None.</p>`;
  return html`<table>
    <thead><tr><th>tenant</th><th>message id</th><th>key</th><th>topic</th><th>status</th><th>attempts</th>
      <th>next attempt</th><th>last error</th>${actions ? html`<th></th>` : ""}</tr></thead>
    <tbody>
      ${entries.map(
        (m) => html`<tr data-message="${m.messageId}">
        <td>${visible(m.tenantId)}</td><td><code>${visible(m.messageId)}</code></td>
        <td class="key"><a href="${runPath(m.tenantId, m.key)}">${visible(m.key)}</a></td>
        <td>${visible(m.topic)}</td><td>${badge(m.status)}</td><td>${m.attempts}</td>
        <td>${iso(m.availableAt)}</td><td>${m.lastError ? visible(m.lastError) : ""}</td>
        ${actions ? html`<td><a href="${outboxRetryPath(m.tenantId, m.messageId)}">Retry…</a></td>` : ""}
      </tr>`,
      )}
    </tbody>
  </table>`;
}

/** The outbox page body; `actions` decides whether requeue links appear at all. */
export function outboxPage(pending: readonly OutboxEntry[], dead: readonly OutboxEntry[], actions: boolean) {
  return html`<h1>Outbox</h1>
    <h2>Dead letters</h2>
    ${rows(dead, actions)}
    <h2>Pending</h2>
    ${rows(pending, actions)}`;
}
