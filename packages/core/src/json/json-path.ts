/**
 * Paths into a JSON value as error messages print them: `$.items[1]."a b"`.
 * A path through a very deep value is shortened to its two ends and a
 * count, so a hostile 2 000-level input cannot turn one issue into
 * kilobytes of `[0][0]...`.
 */

/** Segments printed whole; a longer path keeps its first and last ones. */
const MAX_SEGMENTS = 12;
const HEAD = 4;
const TAIL = 2;

/** One step into a value: `[3]` for an index, `.name` or `."a b"` for a member. */
export function pathSegment(key: string | number | symbol): string {
  if (typeof key === "number") return `[${key}]`;
  const name = String(key);
  return `.${/^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name)}`;
}

/** `$` followed by the segments, shortened as `$[0][0]…(2000 levels)…[0]` past twelve of them. */
export function formatPath(segments: readonly string[]): string {
  if (segments.length <= MAX_SEGMENTS) return `$${segments.join("")}`;
  const left = segments.slice(0, HEAD).join("");
  const right = segments.slice(segments.length - TAIL).join("");
  return `$${left}…(${segments.length - HEAD - TAIL} levels)…${right}`;
}
