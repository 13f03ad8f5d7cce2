import { describe, expect, it } from "vitest";
import { wrap } from "./wrap.js";

describe("wrap", () => {
  it("keeps lines within the width with a hanging indent", () => {
    const lines = wrap("lease expired 14m ago at recovery point create_order, in step charge", 30, "  ↳ ", "    ");
    expect(lines).toEqual([
      "  ↳ lease expired 14m ago at",
      "    recovery point",
      "    create_order, in step",
      "    charge",
    ]);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(30);
  });
  it("never cuts a long word", () => {
    expect(wrap("key idem_0123456789abcdef", 10)).toEqual(["key", "idem_0123456789abcdef"]);
  });
  it("ignores colour codes when measuring", () => {
    expect(wrap("\u001b[31mred\u001b[39m word", 8)).toEqual(["\u001b[31mred\u001b[39m word"]);
  });
});
