/** Word wrapping for notes and long field values, so output stays within the table width. */
import { stripVTControlCharacters } from "node:util";

/**
 * Wrap `text` at spaces into lines of at most `width` visible characters;
 * the first line starts with `first`, the following lines with `rest`. A
 * word longer than a line (a derived key) stands on its own line uncut.
 */
export function wrap(text: string, width: number, first = "", rest = first): string[] {
  const lines: string[] = [];
  let line = first;
  let lineWidth = stripVTControlCharacters(first).length;
  let empty = true;
  for (const word of text.split(" ")) {
    const w = stripVTControlCharacters(word).length;
    if (!empty && lineWidth + 1 + w > width) {
      lines.push(line);
      line = rest;
      lineWidth = stripVTControlCharacters(rest).length;
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    lineWidth += empty ? w : w + 1;
    empty = false;
  }
  lines.push(line);
  return lines;
}
