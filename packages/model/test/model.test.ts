import { describe, expect, it } from "vitest";
import { CONFIGURATIONS } from "../src/checks.ts";
import { check } from "../src/spin.ts";

// Exhaustive searches of the model as the engine is written: every state of
// each configuration is visited and no property fails.
describe("the model holds every property", () => {
  for (const c of CONFIGURATIONS) {
    for (const mode of ["safety", "liveness"] as const) {
      it(`${c.name}: ${mode} (${c.size})`, async () => {
        const r = await check({ defines: c.defines, mode });
        expect(r.violation, r.output).toBeNull();
        expect(r.errors).toBe(0);
        expect(r.complete, r.output).toBe(true);
        expect(r.statesStored).toBeGreaterThan(1000);
      });
    }
  }
});
