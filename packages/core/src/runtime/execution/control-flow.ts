/**
 * Control flow thrown out of user code by `ctx.fail` and `ctx.reject`
 * (throws, never exported), and the crash a fault-injection hook throws
 * (exported to test tooling as `CrashSignal` from `@idempo/core/internal`).
 * In the code, "signal" alone means a durable signal (`engine.signal`); an
 * AbortSignal is named `abortSignal` or `abort`, a process signal `exitSignal`.
 */
export class FailThrow extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`ctx.fail(${status})`);
  }
}

export class RejectThrow extends Error {
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
