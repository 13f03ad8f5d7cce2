/**
 * A background loop with graceful shutdown: runs `tick` every `intervalMs`
 * (measured from the end of the previous tick, so ticks never overlap) and
 * `stop(boundMs)` waits for the tick in progress, at most `boundMs` (a tick
 * stuck on a connection that never answers must not hold `stop()` up; it
 * goes on, and schedules nothing, when it settles).
 */
import { within } from "./bounded-wait.js";

export function startLoop(
  intervalMs: number,
  tick: () => Promise<void>,
  onError: (error: unknown) => void,
): { stop(boundMs: number): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  const schedule = (delay: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick()
        .catch(onError)
        .finally(() => schedule(intervalMs));
    }, delay);
  };
  schedule(0);

  return {
    async stop(boundMs) {
      stopped = true;
      if (timer) clearTimeout(timer);
      await within(boundMs, running).catch(() => undefined);
    },
  };
}
