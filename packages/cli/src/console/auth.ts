/**
 * Who may use the console. Every page, reads as well as actions, needs the
 * token printed at start-up: opening the printed address (`?token=...`)
 * once stores it in an HTTP-only, same-site cookie, so a page on another
 * site can neither read it nor send it. Every action form repeats the token
 * in a hidden field as well (double-submit, as OWASP's CSRF cheat sheet
 * describes).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Name of the cookie of the console on `port`. Cookies do not tell ports
 * apart: with one name for all, logging in to a second console on the same
 * host would overwrite the first one's token.
 */
export function tokenCookie(port: number): string {
  return `idempo_console_${port}`;
}

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
