/** Writing results: JSON documents and JSON lines for programs, text for people. */
import type { Io } from "./io.js";

/** Print one JSON document on its own line. */
export function printJson(io: Io, value: unknown): void {
  io.out(`${JSON.stringify(value)}\n`);
}

/** Print one JSON object per line (JSON Lines), the `--json` form of every listing. */
export function printJsonLines(io: Io, values: readonly unknown[]): void {
  for (const value of values) io.out(`${JSON.stringify(value)}\n`);
}

/** `1 key`, `3 keys`. */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nouns}`;
}
