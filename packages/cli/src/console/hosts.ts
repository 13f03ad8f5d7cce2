/**
 * Which `Host` headers the console answers. DNS rebinding points a name the
 * attacker owns at 127.0.0.1, so a page on that name reads the console as
 * its own origin; its requests still carry the attacker's name in `Host`.
 * The console answers only names that no outside page can own: the address
 * it listens on, `localhost` and the loopback literals when it listens on
 * loopback, this machine's addresses and host name when it listens on every
 * interface, and the names given with `--allow-host`; each with its port.
 */
import { hostname, networkInterfaces } from "node:os";

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);
const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];

/** `::1` → `[::1]`; names lower-cased: the form a `Host` header takes. */
function hostForm(host: string): string {
  const h = host.toLowerCase();
  return h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
}

function isLoopback(host: string): boolean {
  const h = hostForm(host);
  return h === "localhost" || h === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * `name:port` of a `Host` header value (port 80 when it names none), or
 * undefined when it is missing or malformed.
 */
function parseHost(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(header.trim());
  if (!m) return undefined;
  return `${hostForm(m[1] as string)}:${Number(m[2] ?? 80)}`;
}

/**
 * The `name:port` pairs a console listening on `host:port` answers.
 *
 * @param extra names from `--allow-host`, as `name` (the console's port) or `name:port`.
 */
export function allowedHosts(host: string, port: number, extra: readonly string[] = []): ReadonlySet<string> {
  const names = new Set([hostForm(host)]);
  if (isLoopback(host)) for (const n of LOOPBACK_NAMES) names.add(n);
  if (WILDCARD.has(hostForm(host))) {
    for (const n of LOOPBACK_NAMES) names.add(n);
    names.add(hostname().toLowerCase());
    for (const list of Object.values(networkInterfaces())) {
      for (const a of list ?? []) names.add(hostForm(a.address.replace(/%.*$/, "")));
    }
  }
  const allowed = new Set([...names].map((n) => `${n}:${port}`));
  for (const e of extra) {
    const parsed = parseHost(/:\d+$/.test(e) && !e.endsWith("]") ? e : `${e}:${port}`);
    if (parsed) allowed.add(parsed);
  }
  return allowed;
}

/** Whether a request's `Host` header names one of `allowed`. */
export function hostAllowed(header: string | undefined, allowed: ReadonlySet<string>): boolean {
  const parsed = parseHost(header);
  return parsed !== undefined && allowed.has(parsed);
}
