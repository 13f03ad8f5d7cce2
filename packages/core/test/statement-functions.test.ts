/**
 * The argument-count table of store/statement-calls.ts is written by hand;
 * the migrated schema is the truth. Each entry must name a function of the
 * schema whose newest form (most arguments) takes exactly that many, and
 * answers as the entry says: rows (a set) or one boolean. A migration that
 * adds an overload with one more argument fails here until the table (and
 * the store function that passes the arguments) follows.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { FUNCTIONS } from "../src/store/statement-calls.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();

interface Form {
  proname: string;
  nargs: number;
  args: string;
  returns_set: boolean;
  returns: string;
}

/** Every form of every function in the engine's schema, newest (most arguments) first. */
async function forms(): Promise<Form[]> {
  const { rows } = await sql<Form>`
    SELECT p.proname, p.pronargs::int AS nargs, pg_get_function_identity_arguments(p.oid) AS args,
           p.proretset AS returns_set, format_type(p.prorettype, NULL) AS returns
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'idempo'
    ORDER BY p.proname, p.pronargs DESC`.execute(t.db);
  return rows;
}

/** What the table says and what the schema has, for one function, in the same shape. */
function shapes(all: Form[]) {
  return Object.entries(FUNCTIONS).map(([name, entry]) => {
    const newest = all.find((f) => f.proname === name);
    return {
      table: { name, arity: entry.arity, answer: entry.answer },
      schema: newest
        ? {
            name,
            arity: newest.nargs,
            answer: newest.returns_set ? "row" : newest.returns === "boolean" ? "ok" : newest.returns,
          }
        : { name, missing: true },
    };
  });
}

describe("the statement functions' table against pg_proc", () => {
  it("names each function with the arity and answer of its newest form in the migrated schema", async () => {
    const all = await forms();
    for (const { table, schema } of shapes(all)) expect(schema, table.name).toEqual(table);
  });

  it("a call built from the table reaches that form: each parameter's type is the form's", async () => {
    // The call text carries no casts, so the server resolves $1..$n by count alone; one form per arity keeps that exact.
    const all = await forms();
    for (const [name, entry] of Object.entries(FUNCTIONS)) {
      const same = all.filter((f) => f.proname === name && f.nargs === entry.arity);
      expect(
        same.map((f) => f.proname),
        name,
      ).toEqual([name]);
    }
  });

  it("tells a wrong arity from the right one", async () => {
    const all = await forms();
    const wrong = shapes(all.map((f) => (f.proname === "renew_lease" ? { ...f, nargs: f.nargs + 1 } : f)));
    const row = wrong.find((s) => s.table.name === "renew_lease");
    expect(row?.schema).not.toEqual(row?.table);
  });
});
