/**
 * A stack taken when it is first read rather than when the error is made,
 * for the errors the engine raises as ordinary answers under load (a 409
 * for every duplicate that arrives while its key is in flight). V8 walks
 * the stack, async frames included, whenever an error is constructed;
 * that walk is most of what such an error costs, and its frames are the
 * engine's, the same for every 409. Deferred, the stack is taken where it
 * is read: the frames of the code that caught, logged or printed the error,
 * which is where the request came from. Frames of Node's own printing
 * (`util.inspect`, `console`) above them are left out, so that a
 * `console.log(error)` shows the caller's frames within the usual
 * `Error.stackTraceLimit`.
 */

/** Frames taken on top of `Error.stackTraceLimit`, so that the printer's frames can be dropped. */
const SPARE_FRAMES = 20;
/** The value {@link suspendCapture} returns when the limit could not be changed (a frozen `Error`). */
const NOT_SUSPENDED = Symbol("not suspended");
const FRAME = /^\s+at /;
const NODE_FRAME = /^\s+at (?:.* \()?node:/;

const setLimit = (limit: unknown): boolean => Reflect.set(Error, "stackTraceLimit", limit);

/** Turn stack capture off for the `super()` call that follows; returns what {@link resumeCapture} needs. */
export function suspendCapture(): unknown {
  const limit = Error.stackTraceLimit;
  return setLimit(0) ? limit : NOT_SUSPENDED;
}

/** Turn capture back on, in a `finally` right after `super()`. */
export function resumeCapture(suspended: unknown): void {
  if (suspended !== NOT_SUSPENDED) setLimit(suspended);
}

/**
 * Drop the empty stack the constructor installed while capture was off, so
 * that the prototype's getter answers instead (see {@link deferStacks}).
 * An error made while capture could not be suspended keeps its stack.
 */
export function dropEmptyStack(error: Error, suspended: unknown): void {
  if (suspended !== NOT_SUSPENDED) delete (error as { stack?: string }).stack;
}

/** The frames after the message: the reader's own (Node's printing) dropped, then `limit` kept. */
function callerFrames(stack: string, limit: number): string {
  const lines = stack.split("\n");
  const first = lines.findIndex((line) => FRAME.test(line));
  if (first < 0) return stack;
  let from = first;
  while (from < lines.length && NODE_FRAME.test(lines[from] as string)) from++;
  if (from === lines.length) from = first;
  return [...lines.slice(0, first), ...lines.slice(from, from + limit)].join("\n");
}

function setStack(this: Error, stack: unknown): void {
  Object.defineProperty(this, "stack", { value: stack, writable: true, configurable: true, enumerable: false });
}

function stackOnFirstRead(this: Error): unknown {
  const limit = Error.stackTraceLimit;
  const finite = typeof limit === "number" && Number.isFinite(limit);
  if (finite) setLimit(limit + SPARE_FRAMES);
  try {
    // Installs `stack` on the error itself, this getter's frame left out.
    Error.captureStackTrace(this, stackOnFirstRead);
  } finally {
    if (finite) setLimit(limit);
  }
  const stack: unknown = this.stack;
  const kept = finite && typeof stack === "string" ? callerFrames(stack, limit) : stack;
  setStack.call(this, kept);
  return kept;
}

/**
 * Give the errors of class `cls` a stack taken on first read. Their
 * constructors call {@link suspendCapture} before `super()`,
 * {@link resumeCapture} in a `finally` around it, then
 * {@link dropEmptyStack}. Assigning `stack` works as on any error.
 */
export function deferStacks(cls: { prototype: Error }): void {
  Object.defineProperty(cls.prototype, "stack", {
    get: stackOnFirstRead,
    set: setStack,
    configurable: true,
    enumerable: false,
  });
}
