/**
 * The store's SQL template: `` sql`... ${value} ...` `` is a statement whose
 * values go to the driver as parameters (`$1`, `$2`, ...), never into the
 * text, and whose fragments (another `sql` template, `sql.id`, `sql.raw`,
 * `sql.join`, `sql.val`) are spliced in as text with their own parameters
 * renumbered. The text goes to the data layer as it is: no query builder,
 * no plugin, no dialect stands between the engine's statements and the
 * driver. The shape of Kysely's `sql` template, which the store used
 * before; only what the store needs.
 */
import type { Executor } from "./executor.js";

/** A statement or a fragment of one; `R` is the row it answers. */
export class Sql<R = unknown> {
  constructor(
    /** The text between the values; one more than `values`. */
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}

  /** Run the statement on `db` and return its rows. */
  async execute(db: Executor): Promise<{ rows: R[] }> {
    const values: unknown[] = [];
    const text = spliced(this, values);
    return { rows: await db.query<R>(text, values) };
  }

  /**
   * Run a fenced write of one row (`... RETURNING 1`) on `db`.
   * @returns true when it wrote the row, false when its fence refused it.
   */
  async wroteOne(db: Executor): Promise<boolean> {
    return (await this.execute(db)).rows.length === 1;
  }
}

function spliced(fragment: Sql<unknown>, values: unknown[]): string {
  let text = fragment.strings[0] as string;
  for (let i = 0; i < fragment.values.length; i++) {
    const value = fragment.values[i];
    text += value instanceof Sql ? spliced(value, values) : `$${values.push(value)}`;
    text += fragment.strings[i + 1] as string;
  }
  return text;
}

/** An identifier quoted as PostgreSQL quotes it: `"name"` with `"` doubled. */
function quoted(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A statement with parameters: `` sql<{ n: number }>`SELECT count(*)::int AS n FROM ${t.runs} WHERE key = ${key}` ``. */
export function sql<R = unknown>(strings: TemplateStringsArray, ...values: unknown[]): Sql<R> {
  return new Sql<R>(strings, values);
}

/** A quoted, dotted name: `sql.id("idempo", "runs")` is `"idempo"."runs"`. */
sql.id = (...names: string[]): Sql => new Sql([names.map(quoted).join(".")], []);

/** Text spliced in as it is (a migration's statement); never a value from outside. */
sql.raw = (text: string): Sql => new Sql([text], []);

/** One parameter, also where a bare array would read as a list (`= ANY(${sql.val(names)}::text[])`). */
sql.val = (value: unknown): Sql => new Sql(["", ""], [value]);

/** Fragments one after another, with `separator` between them (Default: `, `). */
sql.join = (fragments: readonly Sql[], separator: Sql = new Sql([", "], [])): Sql => {
  const values: Sql[] = [];
  fragments.forEach((fragment, i) => {
    if (i > 0) values.push(separator);
    values.push(fragment);
  });
  return new Sql(
    Array.from({ length: values.length + 1 }, () => ""),
    values,
  );
};
