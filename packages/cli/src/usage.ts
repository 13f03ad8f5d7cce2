/** Usage errors (exit 2) and the option parsers that raise them. */
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { EXIT_USAGE } from "./errors.js";
import { parseDuration } from "./format/duration.js";

/** Stop with a usage error: the message, then the command's help, exit 2. */
export function usageError(command: Command, message: string): never {
  command.error(`error: ${message}`, { exitCode: EXIT_USAGE, code: "idempo.usage" });
}

/** `--limit`: an integer from 1 to 1000 (the engine's page bounds). */
export function parseLimit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 1000) throw new InvalidArgumentError("must be an integer from 1 to 1000");
  return n;
}

/** A positive integer option such as `--batch-size`. */
export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError("must be a positive integer");
  }
  return n;
}

/** `--older-than`: a duration such as `90s`, `10m`, `1h30m`, `2d`; returns ms. */
export function parseAge(value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new InvalidArgumentError("must be a duration such as 90s, 10m, 1h30m or 2d");
  return ms;
}

/** `--schema`: a plain SQL identifier, as the engine requires. */
export function parseSchema(value: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(value)) {
    throw new InvalidArgumentError("must be a plain SQL identifier (letters, digits, _), at most 63 characters");
  }
  return value;
}

/**
 * Stop with a usage error unless `name` can be a schedule's name, as
 * `engine.schedule` accepts it: 1-128 letters, digits, `.`, `_` or `-`,
 * starting with a letter or digit. Anything else names no schedule, and is
 * not echoed (it may hold terminal controls).
 */
export function checkScheduleName(command: Command, name: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) {
    usageError(
      command,
      "a schedule's name is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit",
    );
  }
}

/** `--port`: 0-65535 (0 lets the system pick a free port). */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535) throw new InvalidArgumentError("must be a port number from 0 to 65535");
  return n;
}
