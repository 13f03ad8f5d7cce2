/**
 * Control flow thrown out of user code by `ctx.fail` and `ctx.reject`, and
 * the crash signal of the fault-injection hook. Internal: never exported.
 */
export class FailSignal extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`ctx.fail(${status})`);
  }
}

export class RejectSignal extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`ctx.reject(${status})`);
  }
}

/** Thrown by a fault hook to stop an attempt as a crash would: no clean-up, no writes. */
export class CrashSignal extends Error {
  constructor(readonly point: string) {
    super(`injected crash at ${point}`);
    this.name = "CrashSignal";
  }
}
