/**
 * A key whose record expired and was swept: only its tombstone is left, and
 * a request for the key gets 410 `key_expired` until the tombstone's time
 * ends (the same sentence as `idempo keys show`). No verbs apply to it.
 */
import type { TombstoneRecord } from "@idempo/core";
import { html } from "hono/html";
import { iso } from "../format/times.js";
import { refuseExpired } from "../format/tombstone.js";
import { visible } from "../format/visible.js";
import { badge } from "./layout.js";

/** The page body for a tombstone. */
export function tombstonePage(record: TombstoneRecord) {
  return html`<hgroup>
      <h1>${visible(record.key)}</h1>
      <p>tenant <strong>${visible(record.tenantId)}</strong> · workflow <strong>${visible(record.workflow)}</strong> ·
        ${badge("expired")} tombstone</p>
    </hgroup>
    <article>
      <p class="forecast">A retry now would: <span data-testid="forecast">${refuseExpired(record.expiresAt, record.tombstoneUntil)}</span></p>
      <p>Only the tombstone is left: the run's input, state, response and timeline were swept with its record.</p>
    </article>
    <table>
      <tbody>
        <tr><th>outcome</th><td>${record.outcome}</td></tr>
        <tr><th>completed</th><td>${iso(record.completedAt)}</td></tr>
        <tr><th>expired</th><td>${iso(record.expiresAt)} (end of retention)</td></tr>
        <tr><th>tombstone until</th><td data-testid="tombstone-until">${iso(record.tombstoneUntil)}</td></tr>
      </tbody>
    </table>`;
}
