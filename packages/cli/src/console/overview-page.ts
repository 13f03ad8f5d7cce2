/**
 * The overview: the last hour or day of one database at a glance, drawn
 * from the engine's own tables (`engine.overview` and
 * `engine.listScheduleTicks`): the counts now as tiles, then runs started
 * and finished per bucket by outcome, the parked and stuck runs, the outbox
 * backlog, p50/p95 durations per workflow and item, and the schedules'
 * next ticks. Each chart says what exactly it draws where the tables
 * cannot tell the whole story (parked and stuck keep no history).
 */
import type { Overview, OverviewWindow, ScheduleTicks } from "@idempo/core";
import { html } from "hono/html";
import { iso } from "../format/times.js";
import { durationChart } from "./duration-chart.js";
import { ticksChart } from "./ticks-chart.js";
import { timeChart } from "./time-chart.js";

/** The windows the page offers: label and the span ahead its tick chart covers. */
const WINDOWS: Record<OverviewWindow, { label: string; aheadMs: number; per: string }> = {
  hour: { label: "Last hour", aheadMs: 3_600_000, per: "per minute" },
  day: { label: "Last day", aheadMs: 86_400_000, per: "per 15 minutes" },
};

const COLOURS = {
  started: "#64748b",
  succeeded: "#16a34a",
  failed: "#f59e0b",
  errored: "#dc2626",
  canceled: "#9ca3af",
  parked: "#7c3aed",
  stuck: "#dc2626",
  backlog: "#0284c7",
};

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

/** One figure as a tile; `href` leads to the list behind it. */
function tile(id: string, label: string, value: number, href?: string, alarm = false) {
  const body = html`<small>${label}</small><strong data-value>${value}</strong>`;
  return html`<li class="tile${alarm && value > 0 ? " alarm" : ""}" data-tile="${id}">${
    href ? html`<a href="${href}">${body}</a>` : body
  }</li>`;
}

/** The window switch: a link per window, the current one marked. */
function windowSwitch(current: OverviewWindow) {
  return html`<p class="window-switch">${(Object.keys(WINDOWS) as OverviewWindow[]).map(
    (w) =>
      html`<a href="/overview?window=${w}" ${w === current ? html`aria-current="page"` : ""}>${WINDOWS[w].label}</a> `,
  )}</p>`;
}

/** The page body; `tickLimit` is how many next ticks per schedule `schedules` was read with. */
export function overviewPage(o: Overview, schedules: readonly ScheduleTicks[], tickLimit: number) {
  const w = WINDOWS[o.window];
  const chart = { buckets: o.buckets, bucketMs: o.bucketMs };
  const finished = (["succeeded", "failed", "errored", "canceled"] as const).map((outcome) => ({
    name: outcome,
    label: outcome,
    colour: COLOURS[outcome],
    values: o.finished[outcome],
  }));
  return html`<hgroup>
      <h1>Overview</h1>
      <p>${w.label}, read from the engine's tables at <time datetime="${o.now.toISOString()}">${iso(o.now)}</time>
        (database clock, UTC).</p>
    </hgroup>
    ${windowSwitch(o.window)}
    <ul class="tiles">
      ${tile("started", `started, ${w.label.toLowerCase()}`, sum(o.started), "/runs?view=recent")}
      ${tile("succeeded", "succeeded", sum(o.finished.succeeded), "/runs?view=completed")}
      ${tile("failed", "failed", sum(o.finished.failed), "/runs?view=completed", true)}
      ${tile("errored", "errored", sum(o.finished.errored), "/runs?view=completed", true)}
      ${tile("canceled", "canceled", sum(o.finished.canceled), "/runs?view=completed")}
      ${tile("parked", "parked now", o.current.parked, "/runs?view=parked", true)}
      ${tile("stuck", "stuck now", o.current.stuck, "/runs?view=stuck", true)}
      ${tile("in-flight", "in flight now", o.current.inFlight, "/runs?view=in_flight")}
      ${tile("suspended", "suspended now", o.current.suspended, "/runs?view=suspended")}
      ${tile("outbox-pending", "outbox pending", o.current.outboxPending, "/outbox")}
      ${tile("outbox-dead", "dead letters", o.current.outboxDead, "/outbox", true)}
    </ul>
    <div class="charts">
      <section>
        <h2>Runs started <small>${w.per}</small></h2>
        ${timeChart({
          ...chart,
          id: "started",
          kind: "bars",
          description: `runs started ${w.per}`,
          series: [{ name: "started", label: "started", colour: COLOURS.started, values: o.started }],
        })}
      </section>
      <section>
        <h2>Runs finished, by outcome <small>${w.per}</small></h2>
        ${timeChart({ ...chart, id: "finished", kind: "bars", description: `runs finished ${w.per}`, series: finished })}
      </section>
      <section>
        <h2>Parked and stuck</h2>
        ${timeChart({
          ...chart,
          id: "parked-stuck",
          kind: "steps",
          description: "runs parked and stuck now, by when they stopped",
          series: [
            { name: "parked", label: "parked now", colour: COLOURS.parked, values: o.parked, figure: o.current.parked },
            { name: "stuck", label: "stuck now", colour: COLOURS.stuck, values: o.stuck, figure: o.current.stuck },
          ],
        })}
        <p><small>The runs parked or stuck now, by when they stopped (parked, or their lease ended). A run unparked,
          canceled or taken over since keeps no trace of it, so the line shows those still stopped, not every
          run that was.</small></p>
      </section>
      <section>
        <h2>Outbox backlog</h2>
        ${timeChart({
          ...chart,
          id: "outbox",
          kind: "steps",
          description: "undelivered outbox messages",
          series: [
            {
              name: "backlog",
              label: "undelivered",
              colour: COLOURS.backlog,
              values: o.outboxBacklog,
              figure: o.outboxBacklog.at(-1) ?? 0,
            },
          ],
        })}
        <p><small>Messages written and not delivered (pending or dead) at each moment, from their write and delivery
          times. Now: ${o.current.outboxPending} pending, ${o.current.outboxDead} dead.</small></p>
      </section>
    </div>
    <section>
      <h2>Durations: p50 and p95</h2>
      <p><small>Runs completed in the window, from creation to completion (canceled ones left out), and below each
        workflow its phases, step calls, sleeps and waits that ended in the window. The dark bar ends at p50, the light
        one at p95; the axis is logarithmic.</small></p>
      ${durationChart(o)}
    </section>
    <section>
      <h2>Next schedule ticks <small>the ${o.window === "hour" ? "next hour" : "next day"}</small></h2>
      ${ticksChart(schedules, o.now, w.aheadMs, tickLimit)}
      <p><a href="/schedules">Every schedule with its last runs →</a></p>
    </section>`;
}
