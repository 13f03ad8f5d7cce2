/**
 * The check in front of every console route: a `Host` the console answers
 * (else 421, see hosts.ts), and the start-up token in this console's cookie
 * (else 401 with how to get in). A GET carrying `?token=` that matches logs
 * the browser in: it sets the cookie and redirects to the same address
 * without the token. Only the stylesheet is served without the token.
 */
import type { MiddlewareHandler } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { html } from "hono/html";
import { tokenMatches } from "./auth.js";
import { hostAllowed } from "./hosts.js";
import { page } from "./layout.js";

/** What the guard checks against. */
export interface Access {
  /** The start-up token. */
  readonly token: string;
  /** Name of this console's cookie (see `tokenCookie`). */
  readonly cookie: string;
  /** `name:port` pairs the console answers (see `allowedHosts`). */
  readonly hosts: ReadonlySet<string>;
}

const PUBLIC_PATHS = new Set(["/assets/console.css"]);

/** The page a browser without the token gets. */
function loginPage(wrongToken: boolean) {
  return page(
    "Token needed",
    "",
    html`<h1>Token needed</h1>
      <p>${wrongToken ? "That token is not this console's. " : ""}Every page of this console needs the token that
        <code>idempo console</code> printed at start-up: open the address it printed, the one ending in
        <code>/?token=…</code>, in this browser. A console started again prints a new one.</p>`,
  );
}

/** The middleware; mount it before every route. */
export function accessGuard(access: Access): MiddlewareHandler {
  return async (c, next) => {
    if (!hostAllowed(c.req.header("host"), access.hosts)) {
      return c.text("this console answers only the host names it listens on (see --allow-host)\n", 421);
    }
    const presented = c.req.query("token");
    if (presented !== undefined && c.req.method === "GET") {
      if (!tokenMatches(access.token, presented)) return c.html(loginPage(true), 401);
      setCookie(c, access.cookie, access.token, { httpOnly: true, sameSite: "Strict", path: "/" });
      const url = new URL(c.req.url);
      url.searchParams.delete("token");
      const target = url.pathname === "/" && url.search === "" ? "/runs?view=stuck" : `${url.pathname}${url.search}`;
      return c.redirect(target, 303);
    }
    if (PUBLIC_PATHS.has(c.req.path)) return next();
    if (!tokenMatches(access.token, getCookie(c, access.cookie))) return c.html(loginPage(false), 401);
    return next();
  };
}
