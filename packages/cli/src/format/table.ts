/**
 * Aligned, borderless tables (cli-table3) that fit a width budget: columns
 * marked `shrink` give up room, widest first, and their cells are cut with
 * an ellipsis, so a long key never pushes the table past 100 columns.
 */
import { stripVTControlCharacters } from "node:util";
import Table from "cli-table3";
import type { Paint } from "./colour.js";
import { wrap } from "./wrap.js";

/** The widest a table may be, in terminal columns. */
export const TABLE_WIDTH = 100;
const GAP = 2;
const MIN_SHRUNK = 8;
const NOTE_INDENT = 2;

/** One column of a table. */
export interface Column {
  readonly header: string;
  /** May be narrowed (cells cut with `…`) to fit the width. (Default: false) */
  readonly shrink?: boolean;
  /** (Default: left) */
  readonly align?: "left" | "right";
}

/**
 * A row of cells, or a note under the previous row: indented, wrapped at
 * the table width, never cut. Each line of a note (split on `\n`) wraps on its own.
 */
export type Row = readonly string[] | { readonly note: string };

const BORDERLESS = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "",
};

const visibleWidth = (text: string) => stripVTControlCharacters(text).length;

/** Column widths (content only) that fit `width`, shrinking the `shrink` columns widest first. */
function fitWidths(columns: readonly Column[], rows: readonly (readonly string[])[], width: number): number[] {
  const widths = columns.map((c, i) => Math.max(visibleWidth(c.header), ...rows.map((r) => visibleWidth(r[i] ?? ""))));
  const budget = width - GAP * (columns.length - 1);
  let excess = widths.reduce((a, b) => a + b, 0) - budget;
  while (excess > 0) {
    let widest = -1;
    for (let i = 0; i < columns.length; i++) {
      const w = widths[i] ?? 0;
      if (columns[i]?.shrink && w > MIN_SHRUNK && (widest < 0 || w > (widths[widest] ?? 0))) widest = i;
    }
    if (widest < 0) break; // nothing left to give: the table is as narrow as it gets
    widths[widest] = (widths[widest] ?? 0) - 1;
    excess--;
  }
  return widths;
}

/**
 * Render rows under a bold header as aligned text, at most `width` columns
 * wide (Default: {@link TABLE_WIDTH}). Returns the text with a trailing newline.
 *
 * @example
 * renderTable([{ header: "TENANT" }, { header: "KEY", shrink: true }], [["acme", "order-1"]], paint)
 */
export function renderTable(
  columns: readonly Column[],
  rows: readonly Row[],
  paint: Paint,
  width = TABLE_WIDTH,
): string {
  const cellRows = rows.filter((r): r is readonly string[] => Array.isArray(r));
  const widths = fitWidths(columns, cellRows, width);
  const table = new Table({
    head: columns.map((c) => paint("bold", c.header)),
    // cli-table3 widths include padding: each column carries the gap on its right (trimmed off the last).
    colWidths: widths.map((w) => w + GAP),
    colAligns: columns.map((c) => c.align ?? "left"),
    chars: BORDERLESS,
    style: { "padding-left": 0, "padding-right": GAP, head: [], border: [], compact: true },
    truncate: "…",
    wordWrap: false,
  });
  for (const row of cellRows) table.push([...row]);
  // Cells are single lines (no wrapping), so line i + 1 of the table is row i; notes go in between.
  const [header = "", ...rendered] = table.toString().split("\n");
  const out = [header.trimEnd()];
  let next = 0;
  for (const row of rows) {
    if (Array.isArray(row)) out.push((rendered[next++] ?? "").trimEnd());
    else {
      const indent = " ".repeat(NOTE_INDENT);
      for (const part of (row as { note: string }).note.split("\n"))
        out.push(...wrap(part, width, indent, `${indent}  `));
    }
  }
  return `${out.join("\n")}\n`;
}
