/** Terminal colours: on a TTY only, never with `NO_COLOR`, forced with `FORCE_COLOR`. */
import { styleText } from "node:util";

/** The styles the CLI uses. */
type Style = "bold" | "dim" | "red" | "green" | "yellow" | "cyan";

/** Wraps text in a style, or returns it unchanged when colours are off. */
export type Paint = (style: Style, text: string) => string;

/**
 * Whether to colour output written to `stream`. `NO_COLOR` (any non-empty
 * value, see no-color.org) always wins; `FORCE_COLOR` (not `0`) turns colours
 * on for pipes; otherwise only a TTY whose `TERM` is not `dumb` gets colour.
 */
export function colourEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "" && env.FORCE_COLOR !== "0") return true;
  return stream.isTTY === true && env.TERM !== "dumb";
}

/** A {@link Paint} that colours when `enabled` and is the identity otherwise. */
export function painter(enabled: boolean): Paint {
  if (!enabled) return (_style, text) => text;
  // The decision is ours (colourEnabled), so node must not second-guess it from process.stdout.
  return (style, text) => styleText(style, text, { validateStream: false });
}
