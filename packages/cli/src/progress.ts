/**
 * Progress for long-running commands: a single updating line on stderr,
 * only when stderr is a terminal, so pipes and `--json` stay clean.
 */
import type { Io } from "./io.js";

/** A progress line; `done` clears it. */
export interface Progress {
  update(text: string): void;
  done(): void;
}

/** Show `text` as progress on a terminal's stderr; a no-op elsewhere. */
export function startProgress(io: Io, text: string): Progress {
  if (!io.stderrIsTTY) return { update: () => undefined, done: () => undefined };
  const show = (t: string) => io.err(`\r\u001b[K${t}`);
  show(text);
  return { update: show, done: () => io.err("\r\u001b[K") };
}
