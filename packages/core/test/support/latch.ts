/**
 * A latch for tests of work that runs at once: `open()` lets every waiter
 * through. `wait()` fails after `failAfterMs` (default 20 s) so that a
 * latch nobody opens (the work ran one by one) ends as a clear failure
 * instead of the test's timeout; the bound catches a hang, it times nothing.
 */
export interface Latch {
  readonly opened: boolean;
  open(): void;
  wait(): Promise<void>;
}

export function latch(name: string, failAfterMs = 20_000): Latch {
  let opened = false;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    get opened() {
      return opened;
    },
    open() {
      opened = true;
      release();
    },
    wait() {
      if (opened) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`latch '${name}' never opened`)), failAfterMs);
        void gate.then(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

/** A latch that opens once `n` parties wait on it: they all were there at once. */
export function meeting(name: string, n: number, failAfterMs = 20_000): { arrive(): Promise<void> } {
  const l = latch(name, failAfterMs);
  let arrived = 0;
  return {
    arrive() {
      arrived++;
      if (arrived >= n) l.open();
      return l.wait();
    },
  };
}

/**
 * A callback held in the middle: `hold()` opens `entered` (the callback is
 * running) and waits for `gate`, which the test opens when it has done what
 * it must do while the callback runs.
 */
export interface Held {
  readonly entered: Latch;
  readonly gate: Latch;
  hold(): Promise<void>;
}

export function held(what: string): Held {
  const entered = latch(`${what} is running`, 30_000);
  const gate = latch(`${what} may answer`, 120_000);
  return {
    entered,
    gate,
    async hold() {
      entered.open();
      await gate.wait();
    },
  };
}

/** A promise's ending as a value: its result, or the error it failed with. */
export function settled<T>(p: Promise<T>): Promise<{ result: T | undefined; error: unknown }> {
  return p.then(
    (result) => ({ result, error: undefined }),
    (error: unknown) => ({ result: undefined, error }),
  );
}
