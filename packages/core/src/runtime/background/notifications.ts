/**
 * The connections idempo can LISTEN on, for the relay, the workers and the
 * waiters. A notification is only a hint to look again: each of them also
 * polls, which is the guarantee.
 */
import { InvalidOptionError } from "../../errors.js";

/** A notification as node-postgres emits it. */
export interface Notification {
  channel: string;
  payload?: string | undefined;
}

/** A connected client to LISTEN on: a `pg.Client` (never one of the application pool's). */
export interface ListenClient {
  query(text: string): Promise<unknown>;
  on(event: "notification", listener: (message: Notification) => void): unknown;
  off(event: "notification", listener: (message: Notification) => void): unknown;
}

/** A pool that lends idempo connections to LISTEN on, one at a time: a `pg.Pool`. */
export interface ListenPool {
  /** Only read to tell a pool from a client. */
  readonly totalCount: number;
  connect(): Promise<ListenClient & { release(destroy?: boolean | Error): void }>;
}

/** PGlite's own subscription API. */
export interface ListenApi {
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
}

/**
 * A connection idempo can LISTEN on, so a loop wakes the moment something
 * commits; one of:
 * - a `pg.Pool` (best with `pg`): idempo checks out one client for LISTEN,
 *   checks it with a round trip, and when it is lost (an error, a
 *   terminated backend, or no answer in time: a half-open connection)
 *   releases it destroyed and checks out a new one on a later check, so
 *   wake-ups come back once the database answers again. Give it a pool of
 *   its own (`max: 1` is enough), not the application's.
 * - a dedicated, connected `pg.Client`: checked the same way, but a client
 *   cannot reconnect, so once it is lost only polling wakes the loop.
 * - a PGlite instance. PGlite has one connection shared with the Kysely
 *   dialect: start relays and workers (and create an engine with `listen`)
 *   before runs begin, so that the LISTEN is not issued inside an open
 *   transaction (polling still works if it were lost).
 */
export type NotificationSource = ListenPool | ListenClient | ListenApi;

/** Which of the three forms `source` is; a value of none of them is refused. */
export function sourceKind(at: string, source: unknown): "pool" | "client" | "api" {
  const s = source as Record<string, unknown> | null;
  if (typeof s === "object" && s !== null) {
    if (typeof s.listen === "function") return "api";
    if (typeof s.totalCount === "number" && typeof s.connect === "function") return "pool";
    if (typeof s.query === "function" && typeof s.on === "function" && typeof s.off === "function") return "client";
  }
  throw new InvalidOptionError(
    "listen",
    `${at}: listen must be a pg.Pool, a connected pg.Client or a PGlite instance, got ${describe(source)}`,
  );
}

function describe(value: unknown): string {
  if (value === null || typeof value !== "object") return typeof value === "string" ? "a string" : String(value);
  const keys = Object.keys(value);
  return keys.length === 0 ? "an empty object" : `an object with ${keys.slice(0, 5).join(", ")}`;
}
