/**
 * How a guard row is checked against the code: the row's function is cut
 * out of its source file and each of its patterns looked for in it, with
 * runs of white space collapsed, so that formatting never matters and a
 * changed or missing guard always does.
 */
import type { GuardRow } from "./guards.js";

const collapse = (text: string) => text.replace(/\s+/g, " ");
const pattern = (p: string) => collapse(p.replaceAll("@{", "$" + "{"));

/**
 * The text of a top-level function in a source file: from its `function`
 * keyword to the first line that is a lone closing brace. In a `.sql` file,
 * from `CREATE FUNCTION name(` to the `$$;` that closes its body. Null when absent.
 */
function functionText(source: string, fn: string, file: string): string | null {
  const sqlFile = file.endsWith(".sql");
  const start = (
    sqlFile
      ? new RegExp(`^CREATE (?:OR REPLACE )?FUNCTION ${fn}\\(`, "m")
      : new RegExp(`^(?:export )?(?:async )?function ${fn}\\b`, "m")
  ).exec(source);
  if (!start) return null;
  const close = sqlFile ? "\n$$;" : "\n}\n";
  const end = source.indexOf(close, start.index);
  return source.slice(start.index, end < 0 ? undefined : end + close.length);
}

/** The patterns of a row that the function's text lacks (all of them when the function is gone). */
export function missingPatterns(source: string, row: GuardRow): string[] {
  const text = functionText(source, row.fn, row.file);
  if (text === null) return [...row.patterns];
  const body = collapse(text);
  return row.patterns.filter((p) => !body.includes(pattern(p)));
}
