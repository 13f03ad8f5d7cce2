import { describe, expect, it } from "vitest";
import { FINDINGS, VARIANTS, variantSpec } from "../src/checks.ts";
import { check } from "../src/spin.ts";

// Each variant removes one guard the engine relies on; spin must find the
// violation of the property that guard protects. A variant that passes
// means the model (or a property) has become too weak to notice.
describe("each broken variant fails", () => {
  it.each(VARIANTS.map((v) => [v.define, v] as const))("%s", async (_name, v) => {
    const r = await check(variantSpec(v));
    expect(r.violation?.kind, r.output).toBe(v.expect.kind);
    if (v.expect.kind === "assertion") expect(r.violation?.property).toBe(v.expect.property);
  });
});

// An open finding adds what the engine does as written where the model's
// configuration leaves it out; spin must still find the property it breaks.
// When this fails, the engine changed: move the switch into the configuration.
describe.skipIf(FINDINGS.length === 0)("each open finding is still found", () => {
  it.each(FINDINGS.map((v) => [v.define, v] as const))("%s", async (_name, v) => {
    const r = await check(variantSpec(v));
    expect(r.violation?.kind, r.output).toBe(v.expect.kind);
    if (v.expect.kind === "assertion") expect(r.violation?.property).toBe(v.expect.property);
  });
});
