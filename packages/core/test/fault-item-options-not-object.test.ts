/**
 * Fault: `.waitFor(name, null)` and `.step(name, fn, null)` threw a bare
 * TypeError ("Cannot read properties of null") from the builder, and
 * `.waitFor(name, 5)` was accepted as if no options were given. Bad input
 * gets a typed `InvalidOptionError` naming the item.
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError, workflow } from "../src/index.ts";

describe("item options that are not an object", () => {
  for (const bad of [null, 5, "60000", [1]]) {
    it(`waitFor and step refuse ${JSON.stringify(bad)} with InvalidOptionError`, () => {
      const wait = (() => workflow("w").waitFor("go", bad as never)) as () => unknown;
      expect(wait).toThrow(InvalidOptionError);
      expect(wait).toThrow(/workflow 'w', waitFor 'go': options must be an object/);
      const step = (() => workflow("w").step("s", () => ({}), bad as never)) as () => unknown;
      expect(step).toThrow(InvalidOptionError);
      expect(step).toThrow(/workflow 'w', step 's': options must be an object/);
    });
  }

  it("left out, they are still optional", () => {
    expect(() =>
      workflow("w")
        .waitFor("go")
        .step("s", () => ({})),
    ).not.toThrow();
  });
});
