import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { missingPatterns } from "../src/guard-match.ts";
import { GUARDS } from "../src/guards.ts";

const coreSrc = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "core", "src");
const source = (file: string) => readFileSync(join(coreSrc, file), "utf8");

describe("the guards the model assumes are in the code", () => {
  it.each(GUARDS.map((row) => [row.transition, row] as const))("%s", (_name, row) => {
    expect(missingPatterns(source(row.file), row), `${row.file} ${row.fn}`).toEqual([]);
  });

  it("notices a removed guard (the owner-token condition cut out of one branch of advance_run)", () => {
    const row = GUARDS.find((r) => r.fn === "advance_run");
    if (!row) throw new Error("no advance_run row");
    const text = source(row.file);
    const start = text.indexOf("CREATE OR REPLACE FUNCTION advance_run(");
    const cut =
      text.slice(0, start) +
      text
        .slice(start)
        .replace(
          "AND owner_token = p_owner_token AND status = 'in_flight'\n      AND (concurrency_key IS NULL",
          "AND status = 'in_flight'\n      AND (concurrency_key IS NULL",
        );
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toEqual([row.patterns[0]]);
  });

  it("notices a removed guard in a store function (the fence cut out of parkOwnRun)", () => {
    const row = GUARDS.find((r) => r.fn === "parkOwnRun");
    if (!row) throw new Error("no parkOwnRun row");
    const text = source(row.file);
    const cut = text.replace(
      /AND owner_token = \$\{own\.ownerToken\} AND status = 'in_flight'/g,
      "AND status = 'in_flight'",
    );
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toContain(row.patterns[0]);
  });

  it("notices a completion that no longer announces a durable run (pg_notify cut out of mark_completed)", () => {
    const row = GUARDS.find((r) => r.transition === "completion");
    if (!row) throw new Error("no completion row");
    const text = source(row.file);
    const start = text.indexOf("CREATE OR REPLACE FUNCTION mark_completed(");
    const cut =
      text.slice(0, start) +
      text.slice(start).replace("PERFORM pg_notify('idempo_done', completion_tag(p_tenant_id, p_key));", "NULL;");
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toEqual([row.patterns[row.patterns.length - 1]]);
  });

  it("notices a schedule fired without its row lock (SKIP LOCKED cut out of lockDueSchedule)", () => {
    const row = GUARDS.find((r) => r.fn === "lockDueSchedule");
    if (!row) throw new Error("no lockDueSchedule row");
    const text = source(row.file);
    const cut = text.replace("next_tick_at <= now()\n    FOR UPDATE SKIP LOCKED", "next_tick_at <= now()");
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toEqual(row.patterns);
  });

  it("notices a slot taken without its lock (SKIP LOCKED cut out of acquire_concurrency_slot)", () => {
    const row = GUARDS.find((r) => r.fn === "acquire_concurrency_slot");
    if (!row) throw new Error("no acquire_concurrency_slot row");
    const text = source(row.file);
    const cut = text.replace("AND slot = v_slot FOR UPDATE SKIP LOCKED;", "AND slot = v_slot;");
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toEqual([row.patterns[0]]);
  });

  it("notices a renamed function", () => {
    const row = GUARDS.find((r) => r.transition === "takeover");
    if (!row) throw new Error("no takeover row");
    const renamed = source(row.file).replace("FUNCTION take_over_expired_lease(", "FUNCTION take_over(");
    expect(missingPatterns(renamed, row)).toEqual(row.patterns);
  });
});
