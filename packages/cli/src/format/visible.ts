/**
 * Keys and tenant ids as a terminal can tell them apart. A key may hold
 * characters that print as nothing (U+200B, U+FEFF, bidi controls), as a
 * line break (U+0085, U+2028) or as a plain space (U+00A0): printed raw,
 * `k`, `k\u0085` and `k\u2028` look the same in a table, and an operator
 * releases or deletes the wrong one. Those characters are written as
 * `\uXXXX` escapes, and so is a backslash (`\\`), so an escape never
 * looks like a key that spells one out. `--json` prints keys exactly.
 * The console shows every stored string through these two functions too.
 */

// Controls (C0, DEL, C1), format characters (zero-width, bidi), line and paragraph separators,
// private use, unassigned and lone surrogates, spaces other than U+0020, and the backslash.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\\]|(?! )\p{Zs}/gu;

/** The `\uXXXX` escape of a character in JSON: characters beyond the BMP as their surrogate pair. */
function jsonEscaped(ch: string): string {
  let out = "";
  for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).toUpperCase().padStart(4, "0")}`;
  return out;
}

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

/**
 * `value` as indented JSON (2 spaces) whose strings have the characters
 * {@link visible} escapes written as JSON `\uXXXX` escapes: the text still
 * parses to exactly `value`, and reads as `visible` would show its strings
 * (a backslash is already `\\` in JSON). `indent` 0 gives one line.
 *
 * @example
 * visibleJson({ said: "k\u202Egnp.exe" }) // '{\n  "said": "k\\u202Egnp.exe"\n}'
 */
export function visibleJson(value: unknown, indent = 2): string {
  const text = JSON.stringify(value, null, indent) ?? "null";
  // Outside strings JSON holds only ASCII, spaces and the line breaks of the indentation.
  return text.replace(HIDDEN, (ch) => (ch === "\\" || ch === "\n" ? ch : jsonEscaped(ch)));
}
