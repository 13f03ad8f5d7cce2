/**
 * A node-postgres query config `{ text, name }` that passes for its text.
 * Kysely's `PostgresDialect` hands the compiled query's `sql` to
 * `client.query` unchanged, and node-postgres takes a config object in
 * place of the text and prepares a named statement once per connection (its
 * documented "prepared statements"); so the Kysely data layer gives Kysely
 * such a config where it expects the text. Kysely's `log` callback sees it as
 * `event.query.sql`, so it reads like its text: it converts to it (template
 * literals, `String()`, `+`, JSON), prints as it (`console.log`,
 * `util.inspect`), iterates as its characters, and String's methods and
 * `length` answer for it. It is still an object: `typeof` says so, and what
 * insists on a primitive (`Buffer.byteLength`, a hash's `update`) needs
 * `String(sql)`.
 */
export class NamedStatement {
  constructor(
    readonly text: string,
    readonly name: string,
  ) {}

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
  if (typeof fn !== "function" || method in NamedStatement.prototype) continue;
  Object.defineProperty(NamedStatement.prototype, method, {
    value(this: NamedStatement, ...args: unknown[]) {
      return (fn as (...a: unknown[]) => unknown).apply(this.text, args);
    },
  });
}
