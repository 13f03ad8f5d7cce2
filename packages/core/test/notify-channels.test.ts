/**
 * The NOTIFY channels and the completion tag are spelled once on each side:
 * DUE_CHANNEL, DONE_CHANNEL and completionTag in store/notify-channels.ts,
 * and in SQL the literal channel of mark_completed with the function
 * completion_tag (migration 0014). These checks keep the two sides equal.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { completionTag, DONE_CHANNEL, DUE_CHANNEL } from "../src/store/notify-channels.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const storeDir = join(dirname(fileURLToPath(import.meta.url)), "../src/store");

/** Every `pg_notify('<channel>', <payload>)` in the bodies of the schema's functions. */
async function notifiesInFunctions(): Promise<{ fn: string; channel: string; payload: string }[]> {
  const { rows } = await sql<{ proname: string; prosrc: string }>`
    SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'idempo'`.execute(t.db);
  return rows.flatMap((r) =>
    [...r.prosrc.matchAll(/pg_notify\(\s*'([^']*)'\s*,\s*([^;]*)\);/g)].map((m) => ({
      fn: r.proname,
      channel: m[1] ?? "",
      payload: (m[2] ?? "").trim(),
    })),
  );
}

describe("the completion notification's channel and tag", () => {
  it("completion_tag in SQL and completionTag in TypeScript agree, byte for byte of UTF-8", async () => {
    const pairs: [string, string][] = [
      ["acme", "order-1"],
      ["t", ""],
      ["ténant", "clé 🔑"],
      ["a\u001fb", "c"], // the separator itself inside a value
      ["a", "\u001fbc"],
    ];
    for (const [tenant, key] of pairs) {
      const { rows } = await sql<{ tag: string }>`SELECT idempo.completion_tag(${tenant}, ${key}) AS tag`.execute(t.db);
      expect(rows[0]?.tag, `${tenant} / ${key}`).toBe(completionTag(tenant, key));
    }
  });

  it("one function announces completions, on DONE_CHANNEL with completion_tag; every other NOTIFY is DUE_CHANNEL's", async () => {
    const notifies = await notifiesInFunctions();
    const done = notifies.filter((n) => n.channel === DONE_CHANNEL);
    expect(done).toEqual([
      { fn: "mark_completed", channel: DONE_CHANNEL, payload: "completion_tag(p_tenant_id, p_key)" },
    ]);
    for (const n of notifies) expect([DONE_CHANNEL, DUE_CHANNEL]).toContain(n.channel);
  });

  it("no store file but notify-channels.ts spells a channel or the tag", () => {
    const spellings = [DONE_CHANNEL, DUE_CHANNEL, "chr(31)", "md5(", "\\u001f"];
    const offenders = readdirSync(storeDir)
      .filter((f) => f.endsWith(".ts") && f !== "notify-channels.ts")
      .flatMap((f) => {
        const text = readFileSync(join(storeDir, f), "utf8");
        return spellings.filter((s) => text.includes(s)).map((s) => `${f}: ${s}`);
      });
    expect(offenders).toEqual([]);
  });
});
