/** The page shell every console page shares: title, navigation, stylesheet, flash message. */

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

const require = createRequire(import.meta.url);

/** Pico's class-less stylesheet, read once: pages style plain semantic HTML. */
const STYLESHEET = readFileSync(require.resolve("@picocss/pico/css/pico.classless.min.css"), "utf8");

const LOCAL_CSS = `
  main { max-width: 1200px; }
  table { font-size: 0.9rem; }
  td code, td.key { word-break: break-all; }
  .badge { padding: 0.1rem 0.45rem; border-radius: 0.3rem; font-size: 0.8rem; white-space: nowrap; }
  .s-in_flight { background: #fde68a; color: #000; } .s-stuck { background: #fca5a5; color: #000; }
  .s-completed { background: #bbf7d0; color: #000; } .s-parked { background: #c4b5fd; color: #000; }
  .s-suspended { background: #bae6fd; color: #000; } .s-dead { background: #fca5a5; color: #000; }
  .s-pending { background: #fde68a; color: #000; } .s-delivered { background: #bbf7d0; color: #000; }
  .forecast { font-weight: 600; }
  .flash { border-left: 4px solid #16a34a; padding: 0.5rem 1rem; }
  .timeline text { font-size: 12px; fill: currentColor; }
  nav ul li a[aria-current] { font-weight: 700; text-decoration: underline; }
  .s-active, .s-succeeded { background: #bbf7d0; color: #000; } .s-paused, .s-failed { background: #fde68a; color: #000; }
  .s-failing, .s-errored { background: #fca5a5; color: #000; }
  .s-canceled, .s-expired, .s-none { background: #e5e7eb; color: #000; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: 0.6rem; padding: 0; }
  .tiles li { list-style: none; margin: 0; border: 1px solid #d1d5db; border-radius: 0.4rem; padding: 0.4rem 0.7rem; }
  .tiles li a { text-decoration: none; color: inherit; display: block; }
  .tiles small { display: block; font-size: 0.75rem; }
  .tiles strong { font-size: 1.6rem; }
  .tiles li.alarm { border-color: #dc2626; background: #fef2f2; color: #000; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(28rem, 1fr)); gap: 0 1.5rem; }
  .charts > section { min-width: 0; }
  h2 small { font-size: 0.8rem; font-weight: 400; }
  figure.chart { margin: 0 0 0.5rem; }
  .legend { display: flex; flex-wrap: wrap; gap: 0 1rem; padding: 0; margin: 0 0 0.2rem; font-size: 0.85rem; }
  .legend li { list-style: none; margin: 0; }
  .swatch { display: inline-block; width: 0.7rem; height: 0.7rem; margin-right: 0.3rem; border-radius: 2px; }
  svg[data-chart] text { font-size: 11px; fill: currentColor; }
  svg[data-chart] text.strong { font-weight: 700; }
  svg[data-chart] .grid { stroke: #9ca3af; stroke-opacity: 0.35; }
  svg[data-chart] .axis { stroke: currentColor; }
  svg[data-chart] rect.hover:hover { fill: #9ca3af; fill-opacity: 0.15; }
  ul.ticks { padding: 0; margin: 0; font-size: 0.85rem; }
  ul.ticks li { list-style: none; margin: 0; white-space: nowrap; }
  .error { color: #b91c1c; }
  table.schedules { font-size: 0.85rem; } table.schedules code, .nowrap { white-space: nowrap; }
  table.schedules a[role="button"] { padding: 0.2rem 0.5rem; margin-top: 0.4rem; font-size: 0.8rem; }
  .window-switch a[aria-current] { font-weight: 700; text-decoration: underline; }
`;

/** Navigation entries: label and path. */
const NAV: readonly (readonly [string, string])[] = [
  ["Overview", "/overview"],
  ["Stuck", "/runs?view=stuck"],
  ["In flight", "/runs?view=in_flight"],
  ["Parked", "/runs?view=parked"],
  ["Suspended", "/runs?view=suspended"],
  ["Recent", "/runs?view=recent"],
  ["Completed", "/runs?view=completed"],
  ["Outbox", "/outbox"],
  ["Schedules", "/schedules"],
];

/** A whole page: `current` is the navigation path to mark, `body` the escaped content. */
export function page(title: string, current: string, body: Html, flash?: string): Html {
  return html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${title} · idempo console</title>
    <link rel="stylesheet" href="/assets/console.css" />
  </head>
  <body>
    <header>
      <nav>
        <ul><li><strong>idempo console</strong></li></ul>
        <ul>
          ${NAV.map(
            ([label, path]) =>
              html`<li><a href="${path}" ${current === path ? html`aria-current="page"` : ""}>${label}</a></li>`,
          )}
        </ul>
      </nav>
    </header>
    <main>
      ${flash ? html`<p class="flash" role="status">${flash}</p>` : ""}
      ${body}
    </main>
  </body>
</html>`;
}

/** The stylesheet the pages link to. */
export function stylesheet(): string {
  return `${STYLESHEET}\n${LOCAL_CSS}`;
}

/** A status badge. */
export function badge(status: string): Html {
  return html`<span class="badge s-${status}">${status.replace("_", " ")}</span>`;
}
