/** Where a command reads and writes, so output decisions (colour, prompts, progress) are made in one place. */
import type { Paint } from "./format/colour.js";
import { colourEnabled, painter } from "./format/colour.js";

/** The process streams and environment a command runs with. */
export interface Io {
  /** Write to stdout (results). */
  out(text: string): void;
  /** Write to stderr (progress, warnings, errors). */
  err(text: string): void;
  /** Colours for stdout; the identity on pipes and with `NO_COLOR`. */
  readonly paint: Paint;
  /** Whether stdin and stdout are both terminals, i.e. someone can answer a prompt. */
  readonly interactive: boolean;
  /** Whether stderr is a terminal (progress is shown only there). */
  readonly stderrIsTTY: boolean;
  readonly env: NodeJS.ProcessEnv;
}

/** The {@link Io} of this process. */
export function processIo(): Io {
  return {
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    paint: painter(colourEnabled(process.stdout, process.env)),
    interactive: process.stdin.isTTY === true && process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    env: process.env,
  };
}
