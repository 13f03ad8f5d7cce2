/**
 * A wait on the database with a bound: what a background loop uses where an
 * answer may never come (a half-open connection sends neither data nor an
 * error), so that its checks notice it and its `stop()` returns.
 */

/** The bound passed without an answer. */
export class NoAnswer extends Error {}

/**
 * `work`, or a rejection with {@link NoAnswer} after `ms`. `work` itself
 * goes on; its later rejection is dropped.
 */
export function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  work.catch(() => undefined);
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new NoAnswer(`no answer within ${ms} ms`)), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}
