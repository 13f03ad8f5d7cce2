import { describe, expect, it } from "vitest";
import type { Executor } from "./executor.js";
import { sql } from "./sql.js";

/** An executor that records what it was sent. */
function recorder() {
  const sent: { text: string; values: readonly unknown[] }[] = [];
  const db: Executor = {
    isTransaction: false,
    query: async <R>(text: string, values: readonly unknown[]) => {
      sent.push({ text, values });
      return [] as R[];
    },
  };
  return { db, sent };
}

describe("the store's sql template", () => {
  it("sends values as numbered parameters and splices fragments with their own parameters renumbered", async () => {
    const { db, sent } = recorder();
    const runs = sql.id('idem"po', "runs");
    const where = sql.join([sql`tenant_id = ${"acme"}`, sql`key = ${"k-1"}`], sql` AND `);
    await sql`SELECT ${1} FROM ${runs} WHERE ${where} AND workflow = ANY(${sql.val(["a", "b"])}::text[]) ${sql.raw("LIMIT 1")}`.execute(
      db,
    );
    expect(sent).toEqual([
      {
        text: 'SELECT $1 FROM "idem""po"."runs" WHERE tenant_id = $2 AND key = $3 AND workflow = ANY($4::text[]) LIMIT 1',
        values: [1, "acme", "k-1", ["a", "b"]],
      },
    ]);
  });

  it("never puts a value into the text, whatever it holds", async () => {
    const { db, sent } = recorder();
    await sql`SELECT ${"'; DROP TABLE runs; --"}`.execute(db);
    expect(sent[0]).toEqual({ text: "SELECT $1", values: ["'; DROP TABLE runs; --"] });
  });
});
