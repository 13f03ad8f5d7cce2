/** The list pages: stuck, in flight, recent and completed runs, filtered by tenant and workflow. */
import type { ListKeysOptions, RunRecord } from "@idempo/core";
import { html } from "hono/html";
import type { SuspensionFacts } from "../format/diagnosis.js";
import { formatDuration, formatLease } from "../format/duration.js";
import { waitsForLabel, wakesLabel } from "../format/key-table.js";
import { iso } from "../format/times.js";
import { visible } from "../format/visible.js";
import { badge } from "./layout.js";
import { runPath } from "./paths.js";

/** The views of the list page: query `view=` value, heading, and listKeys filter. */
export const VIEWS = {
  stuck: { title: "Stuck runs", filter: { stuck: true } },
  in_flight: { title: "Runs in flight", filter: { status: "in_flight" } },
  parked: { title: "Parked runs", filter: { status: "parked" } },
  suspended: { title: "Suspended runs", filter: { status: "suspended" } },
  recent: { title: "Recent runs", filter: {} },
  completed: { title: "Completed runs", filter: { status: "completed" } },
} as const satisfies Record<string, { title: string; filter: ListKeysOptions }>;

/** A view name. */
export type ViewName = keyof typeof VIEWS;

/** The status to show: in flight with an expired lease reads as stuck. */
export function displayStatus(record: RunRecord): string {
  if (record.status === "in_flight" && (record.leaseRemainingMs ?? 0) <= 0) return "stuck";
  return record.status;
}

/** The lease column: time left in flight, when a suspended run wakes, or past retention. */
function leaseCell(record: RunRecord, now: Date): string {
  if (record.status === "in_flight") return formatLease(record.leaseRemainingMs ?? 0);
  if (record.status === "suspended") return `wakes ${wakesLabel(record, now)}`;
  return record.expired ? "past retention" : "";
}

/** The "waits for" cell of the suspended view: kind and name, then the wake-up time, relative and absolute. */
function waitsForCell(record: RunRecord, now: Date, facts: SuspensionFacts) {
  const w = record.waitingFor;
  const when = record.wakeAt
    ? html`wakes ${wakesLabel(record, now)} · <time datetime="${record.wakeAt.toISOString()}">${iso(record.wakeAt)}</time>`
    : html`wakes on the signal (no timeout)`;
  return html`<td class="waits-for" data-wait-kind="${w?.kind ?? "enqueued"}" data-wait-name="${w?.name ?? ""}"
      data-wake-at="${record.wakeAt?.toISOString() ?? ""}">
      <strong>${visible(waitsForLabel(record, facts))}</strong> <br /><small>${when}</small></td>`;
}

/** The list page body. */
export function runsPage(options: {
  view: ViewName;
  tenant: string;
  workflow: string;
  items: readonly RunRecord[];
  nextHref: string | null;
  now: Date;
  /** What `deliveredSignals` found for a record (whether its awaited signal arrived). */
  facts: (record: RunRecord) => SuspensionFacts;
}) {
  const { view, tenant, workflow, items, now, facts } = options;
  const suspendedView = view === "suspended";
  return html`<h1>${VIEWS[view].title}</h1>
    <form method="get" action="/runs" role="search">
      <input type="hidden" name="view" value="${view}" />
      <fieldset role="group">
        <input name="tenant" placeholder="tenant" value="${tenant}" aria-label="tenant" />
        <input name="workflow" placeholder="workflow" value="${workflow}" aria-label="workflow" />
        <button type="submit">Filter</button>
      </fieldset>
    </form>
    ${
      items.length === 0
        ? html`<p>No runs match.</p>`
        : html`<table>
      <thead><tr><th>tenant</th><th>key</th><th>workflow</th><th>status</th><th>recovery point</th>
        <th>attempt</th>${suspendedView ? html`<th>waits for</th>` : html`<th>lease</th>`}<th>updated</th></tr></thead>
      <tbody>
        ${items.map(
          (r) => html`<tr data-key="${r.key}">
          <td>${visible(r.tenantId)}</td>
          <td class="key"><a href="${runPath(r.tenantId, r.key)}">${visible(r.key)}</a></td>
          <td>${visible(r.workflow)}</td>
          <td>${badge(displayStatus(r))}</td>
          <td>${r.recoveryPoint === null ? "—" : visible(r.recoveryPoint)}</td>
          <td>${r.attempt}</td>
          ${suspendedView ? waitsForCell(r, now, facts(r)) : html`<td>${leaseCell(r, now)}</td>`}
          <td>${formatDuration(now.getTime() - r.updatedAt.getTime())} ago</td>
        </tr>`,
        )}
      </tbody>
    </table>`
    }
    ${options.nextHref ? html`<p><a href="${options.nextHref}">Next page →</a></p>` : ""}`;
}
