/**
 * One run: where it stopped, what a retry would do now (the same sentence
 * as `idempo keys show`), its parent and children, its phases and steps
 * drawn to scale, the stored response and state, and the verbs that apply
 * to it.
 */
import type { HistoryEntry, RunRecord } from "@idempo/core";
import { html } from "hono/html";
import type { SuspensionFacts } from "../format/diagnosis.js";
import { describeRetry, diagnose } from "../format/diagnosis.js";
import { formatDuration, formatLease } from "../format/duration.js";
import { waitsForLabel } from "../format/key-table.js";
import { signalCall } from "../format/signal-call.js";
import { iso, wakeTime } from "../format/times.js";
import { visible, visibleJson } from "../format/visible.js";
import { badge } from "./layout.js";
import { actionPath, runPath } from "./paths.js";
import { RUN_ACTIONS } from "./run-actions.js";
import { displayStatus } from "./runs-page.js";
import { entryOutcome, timeline } from "./timeline.js";

/** The rows a suspended run adds to the details: what it waits for, and when it wakes. */
function suspensionRows(record: RunRecord, now: Date, facts: SuspensionFacts) {
  if (record.status !== "suspended") return "";
  const w = record.waitingFor;
  const send =
    w?.kind === "signal" && !facts.signalDelivered
      ? html` · send it with <code>${visible(signalCall(record, w.name))}</code>`
      : "";
  return html`<tr><th>waits for</th><td data-testid="waits-for">${visible(waitsForLabel(record, facts))}${send}</td></tr>
    <tr><th>wakes</th><td data-testid="wakes">${record.wakeAt ? wakeTime(record.wakeAt, now) : "when the signal arrives (no timeout)"}</td></tr>`;
}

/** A child run's row in the details: its parent, linked, with the item and index that made it. */
function parentRow(record: RunRecord) {
  if (!record.parent) return "";
  const { key, item, index } = record.parent;
  return html`<tr><th>parent</th><td data-testid="parent"><a href="${runPath(record.tenantId, key)}">${visible(key)}</a>
    (item ${visible(item)}, child ${index})</td></tr>`;
}

/** A parent's children (`.child` and `.map`), each linked to its own page, with its status. */
function childrenTable(record: RunRecord) {
  const children = record.children ?? [];
  if (children.length === 0) return "";
  return html`<h2>Children</h2>
    <table data-testid="children">
      <thead><tr><th>item</th><th>key</th><th>workflow</th><th>status</th></tr></thead>
      <tbody>
        ${children.map(
          (c) => html`<tr data-child="${visible(c.item)}[${c.index}]">
          <td>${visible(c.item)}[${c.index}]</td><td><a href="${runPath(record.tenantId, c.key)}"><code>${visible(c.key)}</code></a></td>
          <td>${visible(c.workflow)}</td><td>${c.outcome ? `${c.status} (${c.outcome})` : c.status}</td>
        </tr>`,
        )}
      </tbody>
    </table>`;
}

/** One row per call of a retried step, under its entry: which try, how it ended, how long, its error. */
function tryRows(h: HistoryEntry) {
  return (h.tries ?? []).map(
    (t, i, all) => html`<tr class="try" data-try="${i + 1}">
          <td>↳ try</td><td>${i + 1} of ${all.length}</td><td>${h.attempt}</td><td>${t.error === null ? "succeeded" : "failed"}</td>
          <td>${formatDuration(t.durationMs)}</td><td></td><td>${t.error === null ? "" : visible(t.error)}</td>
        </tr>`,
  );
}

/**
 * The run page body; `allowActions` decides whether verb buttons appear at
 * all; `facts` says whether a suspended run's awaited signal has arrived.
 */
export function runPage(record: RunRecord, now: Date, allowActions: boolean, facts: SuspensionFacts = {}) {
  const d = diagnose(record, now, facts);
  const suspended = record.status === "suspended";
  const history = record.history ?? [];
  const actions = allowActions ? RUN_ACTIONS.filter((a) => a.applies(record)) : [];
  return html`<hgroup>
      <h1>${visible(record.key)}</h1>
      <p>tenant <strong>${visible(record.tenantId)}</strong> · workflow <strong>${visible(record.workflow)}</strong> ·
        ${badge(displayStatus(record))}</p>
    </hgroup>
    ${record.status === "parked" ? html`<p>Parked: <strong>${visible(record.parkedReason ?? "no reason recorded")}</strong></p>` : ""}
    <article>
      <p>Stopped: <span data-testid="stopped-at">${visible(d.stoppedAt)}</span></p>
      <p class="forecast">A retry now would: <span data-testid="forecast">${visible(describeRetry(record, d))}</span></p>
      ${
        d.inDoubt
          ? html`<p>In doubt: step <strong>${visible(d.inDoubt.name)}</strong> started and recorded no result; its call
            may have reached the other system (derived key <code>${d.inDoubt.derivedKey ?? ""}</code>).</p>`
          : ""
      }
      ${
        actions.length > 0
          ? html`<p>${actions.map((a) =>
              a.items
                ? html`<details class="dropdown"><summary>${a.label}</summary><ul>${a
                    .items(record)
                    .map(
                      (item) =>
                        html`<li><a href="${actionPath(a.name, record.tenantId, record.key)}?item=${encodeURIComponent(item)}">${visible(item)}</a></li>`,
                    )}</ul></details>`
                : html`<a role="button" href="${actionPath(a.name, record.tenantId, record.key)}">${a.label}</a> `,
            )}</p>`
          : ""
      }
    </article>
    <table>
      <tbody>
        <tr><th>run id</th><td><code>${record.runId}</code></td></tr>
        <tr><th>recovery point</th><td>${record.recoveryPoint === null ? "— (nothing committed yet)" : visible(record.recoveryPoint)}</td></tr>
        <tr><th>attempts</th><td>${record.attempt}</td></tr>
        <tr><th>owner token</th><td><code>${record.ownerToken ?? "—"}</code></td></tr>
        <tr><th>lease</th><td>${record.status === "in_flight" ? formatLease(record.leaseRemainingMs ?? 0) : "—"}</td></tr>
        ${suspensionRows(record, now, facts)}
        ${parentRow(record)}
        <tr><th>definition</th><td>${record.definition.map(visible).join(" → ")}</td></tr>
        <tr><th>created</th><td>${iso(record.createdAt)}</td></tr>
        <tr><th>updated</th><td>${iso(record.updatedAt)}</td></tr>
        <tr><th>expires</th><td>${record.expiresAt ? iso(record.expiresAt) : "—"}</td></tr>
      </tbody>
    </table>
    <h2>Timeline</h2>
    ${timeline(history, now, suspended)}
    <table data-testid="history">
      <thead><tr><th>kind</th><th>name</th><th>attempt</th><th>outcome</th><th>took</th><th>derived key</th><th>error</th></tr></thead>
      <tbody>
        ${history.map(
          (h) => html`<tr>
          <td>${h.kind}</td><td>${visible(h.name)}</td><td>${h.attempt}</td><td>${entryOutcome(h, suspended)}</td>
          <td>${
            h.finishedAt
              ? formatDuration(h.finishedAt.getTime() - h.startedAt.getTime())
              : suspended && (h.kind === "sleep" || h.kind === "wait")
                ? `${formatDuration(now.getTime() - h.startedAt.getTime())} so far`
                : "—"
          }</td>
          <td>${h.derivedKey ? html`<code>${h.derivedKey}</code>` : "—"}</td><td>${h.error ? visible(h.error) : ""}</td>
        </tr>${tryRows(h)}`,
        )}
      </tbody>
    </table>
    ${childrenTable(record)}
    <h2>Stored response</h2>
    ${
      record.response
        ? html`<p>${record.response.status} (${record.response.outcome})</p>
          <pre data-testid="response"><code>${visibleJson(record.response.body)}</code></pre>`
        : html`<p>None yet: the run has not completed.</p>`
    }
    <details><summary>State</summary><pre><code>${visibleJson(record.state)}</code></pre></details>
    <details><summary>Input</summary><pre><code>${visibleJson(record.input)}</code></pre></details>`;
}
