/**
 * A background loop with graceful shutdown: runs `tick` every `intervalMs`
 * (measured from the end of the previous tick, so ticks never overlap) and
 * `stop()` waits for the tick in progress.
 */

export function startLoop(
  intervalMs: number,
  tick: () => Promise<void>,
  onError: (error: unknown) => void,
): { stop(): Promise<void> } {
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
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
