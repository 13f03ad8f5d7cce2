/**
 * LISTEN on a dedicated connection, for the relay, the workers and the
 * waiters. A notification is only a hint to look again: each of them also
 * polls, which is the guarantee.
 */

/**
 * A connection idempo can LISTEN on, so a loop wakes the moment something
 * commits: a dedicated, connected `pg.Client` (never one of the pool's), or
 * a PGlite instance. PGlite has one connection shared with the Kysely
 * dialect: start relays and workers (and create an engine with `listen`)
 * before runs begin, so that the LISTEN is not issued inside an open
 * transaction (polling still works if it were lost).
 */
export type NotificationSource =
  | { listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>> }
  | {
      query(text: string): Promise<unknown>;
      on(
        event: "notification",
        listener: (message: { channel: string; payload?: string | undefined }) => void,
      ): unknown;
      off(
        event: "notification",
        listener: (message: { channel: string; payload?: string | undefined }) => void,
      ): unknown;
    };

/** The events a `pg.Client` also emits when its connection fails or ends. */
interface ClientEvents {
  on(event: "error" | "end", listener: (error?: unknown) => void): unknown;
  off(event: "error" | "end", listener: (error?: unknown) => void): unknown;
}

/**
 * Subscribe `callback` to `channel` (a fixed identifier, never user input)
 * and return the function that unsubscribes.
 *
 * A client whose connection fails or ends (its backend terminated, the
 * network gone) is reported once through `lost` and never used again: a
 * `pg.Client` cannot reconnect, so polling alone wakes the loop from then
 * on. The listener on its `'error'` event also keeps that failure from
 * crashing the process (an `'error'` event nobody listens to is an uncaught
 * exception). `what` names the loop in the error given to `lost`.
 */
export async function subscribe(
  source: NotificationSource,
  channel: string,
  callback: (payload: string) => void,
  lost: (error: Error) => void,
  what: string,
): Promise<() => Promise<void>> {
  if ("listen" in source) return source.listen(channel, callback);
  const listener = (message: { channel: string; payload?: string | undefined }) => {
    if (message.channel === channel) callback(message.payload ?? "");
  };
  const events = source as unknown as Partial<ClientEvents>;
  let gone = false;
  const onGone = (error?: unknown) => {
    if (gone) return;
    gone = true;
    const why = error instanceof Error ? error.message : "the connection ended";
    lost(new Error(`${what}: the LISTEN connection was lost (${why}); polling from now on`, { cause: error }));
  };
  events.on?.("error", onGone);
  events.on?.("end", onGone);
  source.on("notification", listener);
  await source.query(`LISTEN ${channel}`);
  return async () => {
    source.off("notification", listener);
    // The 'error' listener stays: a dead client may still emit, and must never crash the process.
    events.off?.("end", onGone);
    const alive = !gone;
    gone = true; // stopped: later failures of the client are the application's business
    if (alive) await source.query(`UNLISTEN ${channel}`);
  };
}
