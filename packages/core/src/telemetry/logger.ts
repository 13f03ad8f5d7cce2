/**
 * The logger idempo writes to. idempo never writes to the console on its
 * own: it logs only through a logger the application passes in, with the
 * call shape pino uses (`logger.warn({ ...fields }, "message")`), which
 * pino, a winston wrapper, or `console` itself satisfy.
 */

/** Structured fields of one log line. */
export type LogFields = Record<string, unknown>;

/**
 * A logger with pino's call shape: fields first, then the message.
 * `console` fits as it is; for winston, wrap it as
 * `{ info: (f, m) => w.info(m, f), ... }`.
 */
export interface Logger {
  debug(fields: LogFields, message: string): void;
  info(fields: LogFields, message: string): void;
  warn(fields: LogFields, message: string): void;
  error(fields: LogFields, message: string): void;
}

const ignore = () => undefined;

/** The logger used when none is given: it writes nothing. */
export const SILENT: Logger = Object.freeze({ debug: ignore, info: ignore, warn: ignore, error: ignore });

/** Call `logger[level]` and never let a broken logger break a run. */
export function log(logger: Logger, level: keyof Logger, fields: LogFields, message: string): void {
  try {
    logger[level](fields, message);
  } catch {
    // A logger that throws must not turn a committed phase into an error.
  }
}
