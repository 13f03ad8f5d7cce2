/**
 * The schedules page: every schedule with its state, its next ticks (as the
 * workers will fire them) and its last ticks with the run each started, as
 * `engine.listScheduleTicks` reads them; with `--allow-actions`, a pause or
 * resume button that leads to a confirmation page.
 */
import type { PastTick, ScheduleTicks } from "@idempo/core";
import { html } from "hono/html";
import { formatDuration } from "../format/duration.js";
import { iso } from "../format/times.js";
import { visible } from "../format/visible.js";
import { badge } from "./layout.js";
import { runPath, scheduleActionPath } from "./paths.js";

/** `active`, `paused`, or `failing` (its last tick started no run), as the CLI's table says. */
function state(s: ScheduleTicks["schedule"]): string {
  if (s.paused) return "paused";
  return s.lastError ? "failing" : "active";
}

/** How far from now: `in 3m`, `due for 2m` (no worker fired it yet). */
function relative(at: Date, now: Date): string {
  const ms = at.getTime() - now.getTime();
  return ms > 0 ? `in ${formatDuration(ms)}` : `due for ${formatDuration(ms)}`;
}

function nextTicks(s: ScheduleTicks, now: Date) {
  if (s.schedule.paused) return html`<small>paused: a resume starts from the first tick after it</small>`;
  if (s.next.length === 0) return html`<small>no tick left</small>`;
  return html`<ul class="ticks">${s.next.map(
    (d) => html`<li data-next="${d.toISOString()}"><time datetime="${d.toISOString()}">${iso(d)}</time>
      <small>${relative(d, now)}</small></li>`,
  )}</ul>`;
}

/** What a past tick's run is now: its status, or its outcome once completed. */
function runLabel(t: PastTick): string {
  const run = t.run;
  if (!run) return "none";
  if (run.status === "completed" && run.outcome) return run.outcome;
  return run.status;
}

function lastRuns(s: ScheduleTicks) {
  if (s.last.length === 0) return html`<small>no tick yet</small>`;
  return html`<ul class="ticks">${s.last.map((t) => {
    const label = runLabel(t);
    const took =
      t.run?.createdAt && t.run.completedAt
        ? ` ${formatDuration(t.run.completedAt.getTime() - t.run.createdAt.getTime())}`
        : "";
    const when = html`<time datetime="${t.at.toISOString()}">${iso(t.at)}</time>`;
    return t.run
      ? html`<li data-tick="${t.at.toISOString()}" data-run="${label}"><a href="${runPath(s.schedule.tenantId, t.key)}">${when}</a>
          ${badge(label)}<small>${took}</small></li>`
      : html`<li data-tick="${t.at.toISOString()}" data-run="none">${when} <span class="badge s-none">no run</span></li>`;
  })}</ul>`;
}

/** The page body; `actions` decides whether pause and resume buttons appear at all. */
export function schedulesPage(schedules: readonly ScheduleTicks[], now: Date, actions: boolean) {
  return html`<h1>Schedules</h1>
    <p><small>Next ticks are computed from each cron expression as the workers fire them; a past tick without a run
      was skipped (missed and not caught up, paused, or its input refused). Times in UTC, on the database clock.</small></p>
    ${
      schedules.length === 0
        ? html`<p>No schedules. <code>engine.schedule(name, { cron, workflow, tenantId })</code> makes one.</p>`
        : html`<table class="schedules">
      <thead><tr><th>schedule</th><th>cron</th><th>state</th><th>next ticks</th><th>last ticks and their runs</th></tr></thead>
      <tbody>
        ${schedules.map((s) => {
          const r = s.schedule;
          const verb = r.paused ? "resume" : "pause";
          return html`<tr data-schedule="${r.name}">
            <td><strong class="nowrap">${visible(r.name)}</strong><br /><small>tenant ${visible(r.tenantId)} · ${visible(r.workflow)}</small></td>
            <td><code>${visible(r.cron)}</code><br /><small>${visible(r.timezone)} · catch-up ${r.catchUp}</small></td>
            <td>${badge(state(r))}${
              r.lastError ? html`<br /><small class="error">last error: ${visible(r.lastError)}</small>` : ""
            }${
              actions
                ? html`<br /><a role="button" href="${scheduleActionPath(verb, r.name)}">${r.paused ? "Resume…" : "Pause…"}</a>`
                : ""
            }</td>
            <td>${nextTicks(s, now)}</td>
            <td>${lastRuns(s)}</td>
          </tr>`;
        })}
      </tbody>
    </table>`
    }`;
}
