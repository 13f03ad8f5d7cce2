import { describe, expect, it } from "vitest";
import { parsePan } from "../src/spin.ts";

const clean = `(Spin Version 6.5.2 -- 6 December 2019)
Full statespace search for:
	assertion violations	+
	invalid end states	+
State-vector 64 byte, depth reached 161, errors: 0
   496629 states, stored
   343000 states, matched
   839629 transitions (= stored+matched)
pan: elapsed time 0.36 seconds
`;

describe("reading pan's report", () => {
  it("a clean search", () => {
    const r = parsePan(clean);
    expect(r).toMatchObject({ errors: 0, violation: null, statesStored: 496629, depth: 161, complete: true });
  });
  it("an assertion names its property", () => {
    const r = parsePan(
      `pan:1: assertion violated single_writer (at depth 61)\n${clean.replace("errors: 0", "errors: 1")}`,
    );
    expect(r.violation).toEqual({ kind: "assertion", property: "single_writer" });
  });
  it("an acceptance cycle", () => {
    const r = parsePan(`pan:1: acceptance cycle (at depth 40)\n${clean.replace("errors: 0", "errors: 1")}`);
    expect(r.violation?.kind).toBe("acceptance cycle");
  });
  it("a search cut short proves nothing", () => {
    expect(parsePan(`error: max search depth too small\n${clean}`).complete).toBe(false);
  });
});
