import { describe, expect, it } from "vitest";
import * as testing from "./index.js";

// Changing the public API must be a decision: update this list deliberately.
describe("public exports", () => {
  it("@idempo/testing exports exactly these values", () => {
    expect(Object.keys(testing).sort()).toEqual([
      "ExactlyOnceError",
      "assertExactlyOnce",
      "boundariesOf",
      "crashAtEveryBoundary",
      "createTestClock",
      "pauseAt",
      "testEngine",
    ]);
  });
});
