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

/**
 * Subscribe `callback` to `channel` (a fixed identifier, never user input)
 * and return the function that unsubscribes.
 */
export async function subscribe(
  source: NotificationSource,
  channel: string,
  callback: (payload: string) => void,
): Promise<() => Promise<void>> {
  if ("listen" in source) return source.listen(channel, callback);
  const listener = (message: { channel: string; payload?: string | undefined }) => {
    if (message.channel === channel) callback(message.payload ?? "");
  };
  source.on("notification", listener);
  await source.query(`LISTEN ${channel}`);
  return async () => {
    source.off("notification", listener);
    await source.query(`UNLISTEN ${channel}`);
  };
}
