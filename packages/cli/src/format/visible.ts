/**
 * Keys and tenant ids as a terminal can tell them apart. A key may hold
 * characters that print as nothing (U+200B, U+FEFF, bidi controls), as a
 * line break (U+0085, U+2028) or as a plain space (U+00A0): printed raw,
 * `k`, `k\u0085` and `k\u2028` look the same in a table, and an operator
 * releases or deletes the wrong one. Those characters are written as
 * `\uXXXX` escapes, and so is a backslash (`\\`), so an escape never
 * looks like a key that spells one out. `--json` prints keys exactly.
 */

// Controls (C0, DEL, C1), format characters (zero-width, bidi), line and paragraph separators,
// private use, unassigned and lone surrogates, spaces other than U+0020, and the backslash.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\\]|(?! )\p{Zs}/gu;

function escaped(ch: string): string {
  if (ch === "\\") return "\\\\";
  const code = ch.codePointAt(0) ?? 0;
  const hex = code.toString(16).toUpperCase();
  return code > 0xffff ? `\\u{${hex}}` : `\\u${hex.padStart(4, "0")}`;
}

/**
 * `text` with every character that cannot be seen, or could be taken for
 * another, escaped; a space at either end too (a table would not show it).
 *
 * @example
 * visible("k\u2028") // "k\\u2028"
 */
export function visible(text: string): string {
  const out = text.replace(HIDDEN, escaped);
  return out.replace(/^ | $/g, "\\u0020");
}
