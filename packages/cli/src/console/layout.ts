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
`;

/** Navigation entries: label and path. */
const NAV: readonly (readonly [string, string])[] = [
  ["Stuck", "/runs?view=stuck"],
  ["In flight", "/runs?view=in_flight"],
  ["Parked", "/runs?view=parked"],
  ["Suspended", "/runs?view=suspended"],
  ["Recent", "/runs?view=recent"],
  ["Completed", "/runs?view=completed"],
  ["Outbox", "/outbox"],
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
