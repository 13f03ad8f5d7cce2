import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { GUARDS, missingPatterns } from "../src/guards.ts";

const coreSrc = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "core", "src");
const source = (file: string) => readFileSync(join(coreSrc, file), "utf8");

describe("the guards the model assumes are in the code", () => {
  it.each(GUARDS.map((row) => [row.transition, row] as const))("%s", (_name, row) => {
    expect(missingPatterns(source(row.file), row), `${row.file} ${row.fn}`).toEqual([]);
  });

  it("notices a removed guard (the owner-token condition cut out of commitPhase)", () => {
    const row = GUARDS.find((r) => r.transition === "phase commit");
    if (!row) throw new Error("no phase commit row");
    const text = source(row.file);
    const cut = text.replace(
      /AND owner_token = \$\{own\.ownerToken\} AND status = 'in_flight'/,
      "AND status = 'in_flight'",
    );
    expect(cut).not.toBe(text);
    expect(missingPatterns(cut, row)).toEqual([row.patterns[0]]);
  });

  it("notices a renamed function", () => {
    const row = GUARDS.find((r) => r.transition === "takeover");
    if (!row) throw new Error("no takeover row");
    const renamed = source(row.file).replace("function takeOverExpiredLease", "function takeOver");
    expect(missingPatterns(renamed, row)).toEqual(row.patterns);
  });
});
