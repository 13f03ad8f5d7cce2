import { describe, expect, expectTypeOf, it } from "vitest";
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import { outlineItem } from "./definition.js";
import { workflow } from "./workflow.js";

const respond = () => ({ status: 200, body: null });

describe("workflow definition: .parallel", () => {
  it("types the item's result per branch, merged into state under the item's name", () => {
    workflow("typed")
      .phase("order", () => ({ orderId: "o-1" }))
      .parallel("notify", (p) =>
        p
          .step("email", ({ state }) => {
            // Every branch sees the state before the item.
            expectTypeOf(state.orderId).toEqualTypeOf<string>();
            return { messageId: "m-1" };
          })
          .step("sms", async () => ({ smsId: 7 }))
          .step("audit", () => undefined),
      )
      .respond(({ state }) => {
        expectTypeOf(state.notify).toEqualTypeOf<{
          email: { messageId: string };
          sms: { smsId: number };
          audit: null;
        }>();
        expectTypeOf(state.orderId).toEqualTypeOf<string>();
        return { status: 200, body: state.notify.sms.smsId };
      });
  });

  it("outlines the item with its branches, so a changed branch changes the definition's hash", () => {
    const build = (branches: string[]) =>
      workflow("w")
        .parallel("fan", (p) => {
          let q: typeof p = p;
          for (const b of branches) q = q.step(b, () => ({})) as unknown as typeof p;
          return q;
        })
        .respond(respond).definition;
    const ab = build(["a", "b"]);
    expect(ab.outline).toEqual(['parallel["a","b"]:fan']);
    expect(build(["a", "b"]).hash).toBe(ab.hash);
    expect(build(["b", "a"]).hash).not.toBe(ab.hash);
    expect(build(["a", "c"]).hash).not.toBe(ab.hash);
    expect(build(["a"]).hash).not.toBe(ab.hash);
  });

  it("keeps the name after the first colon, whatever the branch names hold", () => {
    const def = workflow("w")
      .parallel("fan:out", (p) => p.step('x:"y"', () => ({})).step("]:[", () => ({})))
      .respond(respond).definition;
    const entry = def.outline[0] as string;
    expect(entry.slice(entry.indexOf(":") + 1)).toBe("fan:out");
    expect(outlineItem(entry)).toEqual({ kind: "parallel", name: "fan:out", branches: ['x:"y"', "]:["] });
    expect(outlineItem("step:charge")).toEqual({ kind: "step", name: "charge" });
    expect(outlineItem("parallel[not json:fan")).toEqual({ kind: "parallel[not json", name: "fan" });
  });

  it("refuses an item without branches, a repeated branch, a name taken by another item", () => {
    expect(() => workflow("w").parallel("fan", (p) => p)).toThrow(WorkflowDefinitionError);
    expect(() => workflow("w").parallel("fan", (() => undefined) as never)).toThrow(/must return its branches/);
    expect(() => workflow("w").parallel("fan", (p) => p.step("a", () => ({})).step("a", () => ({})))).toThrow(
      /already has a branch named 'a'/,
    );
    expect(() =>
      workflow("w")
        .step("fan", () => ({}))
        .parallel("fan", (p) => p.step("a", () => ({}))),
    ).toThrow(/already has a step named 'fan'/);
    expect(() => workflow("w").parallel("fan", (p) => p.step("", () => ({})))).toThrow(WorkflowDefinitionError);
    expect(() => workflow("w").parallel("fan", (p) => p.step("a", "no" as never))).toThrow(/needs a function/);
  });

  it("checks the item's and each branch's options like a step's, naming the branch", () => {
    const branch = (options: object) => () =>
      workflow("w").parallel("fan", (p) => p.step("a", () => ({}), options as never));
    expect(branch({ retries: 2, timeoutMs: 100, backoffMs: 1 })).not.toThrow();
    expect(branch({ retrys: 2 })).toThrow(InvalidOptionError);
    expect(branch({ retrys: 2 })).toThrow(/branch 'a'.*retries/s);
    expect(branch({ timeoutMs: 0 })).toThrow(/timeoutMs must be an integer/);
    expect(branch({ rateLimit: "provider" })).toThrow(InvalidOptionError);
    expect(branch({ rateLimit: "provider" })).toThrow(/rateLimit is not supported on a parallel branch/);
    const item = (options: object) => () =>
      workflow("w").parallel("fan", (p) => p.step("a", () => ({})), options as never);
    expect(item({ concurrency: 1 })).not.toThrow();
    expect(item({ concurrency: 0 })).toThrow(/concurrency must be an integer from 1 to 1,000/);
    expect(item({ concurency: 2 })).toThrow(InvalidOptionError);
    expect(item({ concurency: 2 })).toThrow(/concurrency/);
  });

  it("is immutable: a shared partial set of branches is not changed by extending it", () => {
    let shared: unknown;
    const one = workflow("w")
      .parallel("fan", (p) => {
        shared = p.step("a", () => ({}));
        return (shared as typeof p).step("b", () => ({}));
      })
      .respond(respond);
    const two = workflow("w")
      .parallel("fan", () => shared as never)
      .respond(respond);
    expect(one.definition.outline).toEqual(['parallel["a","b"]:fan']);
    expect(two.definition.outline).toEqual(['parallel["a"]:fan']);
    expect(Object.isFrozen(shared)).toBe(true);
  });
});
