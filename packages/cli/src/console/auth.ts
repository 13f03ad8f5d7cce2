/**
 * Who may change records through the console. Reading is open to whoever
 * reaches the (loopback by default) address; actions need the token printed
 * at start-up. Opening `/?token=...` once stores it in a same-site, HTTP-only
 * cookie, and every action form repeats it in a hidden field, so a page on
 * another origin can neither read it nor post with it (double-submit, as
 * OWASP's CSRF cheat sheet describes).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";

/** Name of the cookie that carries the action token. */
export const TOKEN_COOKIE = "idempo_console_token";

/** A fresh token for one console process: 24 random bytes, base64url. */
export function mintToken(): string {
  return randomBytes(24).toString("base64url");
}

/** Constant-time comparison of a presented token with the process's own. */
export function tokenMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}
