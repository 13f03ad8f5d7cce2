/**
 * A node-postgres query config `{ text, name?, types }` that passes for its
 * text. Kysely's `PostgresDialect` hands the compiled query's `sql` to
 * `client.query` unchanged, and node-postgres takes a config object in
 * place of the text: with a `name` it prepares the statement once per
 * connection (its documented "prepared statements"), and with `types` it
 * parses the rows with those parsers rather than the client's. So the
 * Kysely data layer gives Kysely such a config where it expects the text:
 * the engine's statements are read with node-postgres' default parsers
 * whatever `types` the application gave its pool. Kysely's `log` callback
 * sees it as `event.query.sql`, so it reads like its text: it converts to
 * it (template literals, `String()`, `+`, JSON), prints as it
 * (`console.log`, `util.inspect`), iterates as its characters, and String's
 * methods and `length` answer for it. It is still an object: `typeof` says
 * so, and what insists on a primitive (`Buffer.byteLength`, a hash's
 * `update`) needs `String(sql)`.
 */
export class StatementConfig {
  /** The name to prepare it under; absent for a statement sent unnamed. */
  readonly name?: string;

  /**
   * @param text the statement.
   * @param name the engine's name for a fixed statement, or undefined.
   * @param types the parsers to read its rows with (node-postgres' `types`), or undefined for the client's.
   */
  constructor(
    readonly text: string,
    name: string | undefined,
    readonly types: unknown,
  ) {
    if (name !== undefined) this.name = name;
  }

  get length(): number {
    return this.text.length;
  }

  toString(): string {
    return this.text;
  }

  toJSON(): string {
    return this.text;
  }

  [Symbol.toPrimitive](): string {
    return this.text;
  }

  [Symbol.iterator](): Iterator<string> {
    return this.text[Symbol.iterator]();
  }

  /** What `console.log` and `util.inspect` print: the text, as for a string. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.text;
  }
}
for (const method of Object.getOwnPropertyNames(String.prototype)) {
  const fn = (String.prototype as unknown as Record<string, unknown>)[method];
  if (typeof fn !== "function" || method in StatementConfig.prototype) continue;
  Object.defineProperty(StatementConfig.prototype, method, {
    value(this: StatementConfig, ...args: unknown[]) {
      return (fn as (...a: unknown[]) => unknown).apply(this.text, args);
    },
  });
}
