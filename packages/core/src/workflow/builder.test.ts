import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import { workflow } from "./workflow.js";

const noop = async () => ({});
const respond = () => ({ status: 200, body: null });
const names = (wf: { definition: { items: readonly { name: string }[] } }) => wf.definition.items.map((i) => i.name);

function definitionError(fn: () => unknown): WorkflowDefinitionError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(error).toMatchObject({ code: "workflow_definition", httpStatus: 500 });
    return error as WorkflowDefinitionError;
  }
  throw new Error("expected a WorkflowDefinitionError");
}

describe("workflow definition: duplicate names", () => {
  it.each([
    ["phase, phase", (w: ReturnType<typeof workflow>) => w.phase("a", noop).phase("a", noop)],
    ["phase, step", (w: ReturnType<typeof workflow>) => w.phase("a", noop).step("a", noop)],
    ["step, phase", (w: ReturnType<typeof workflow>) => w.step("a", noop).phase("a", noop)],
    ["step, step", (w: ReturnType<typeof workflow>) => w.step("a", noop).step("a", noop)],
    ["apart", (w: ReturnType<typeof workflow>) => w.phase("a", noop).step("b", noop).phase("c", noop).step("a", noop)],
  ])("rejects a repeated name (%s) and names the clash", (_case, build) => {
    const error = definitionError(() => build(workflow("w")));
    expect(error.message).toContain("'a'");
    expect(error.message).toContain("'w'");
  });
});

describe("workflow definition: bad names", () => {
  it.each([
    ["empty", ""],
    ["101 characters", "x".repeat(101)],
    ["a newline", "a\nb"],
    ["NUL", "a\u0000"],
    ["DEL", "a\u007f"],
    ["not a string", 42],
    ["undefined", undefined],
  ])("rejects a workflow, phase or step name that is %s", (_what, name) => {
    definitionError(() => workflow(name as string));
    definitionError(() => workflow("w").phase(name as string, noop));
    definitionError(() => workflow("w").step(name as string, noop));
  });

  it("accepts a 100-character name", () => {
    const n = "x".repeat(100);
    expect(names(workflow(n).phase(n, noop).respond(respond))).toEqual([n]);
  });

  it("rejects a phase or step without a function", () => {
    definitionError(() => workflow("w").phase("p", undefined as never));
    definitionError(() => workflow("w").step("s", "not a function" as never));
  });

  it.each([
    ["leaseMs", 0],
    ["leaseMs", -1],
    ["leaseMs", 1.5],
    ["retentionMs", Number.NaN],
    ["retentionMs", Number.POSITIVE_INFINITY],
  ])("rejects option %s = %s with InvalidOptionError naming it and its range", (field, value) => {
    expect(() => workflow("w", { [field]: value })).toThrow(InvalidOptionError);
    expect(() => workflow("w", { [field]: value })).toThrow(new RegExp(`${field} must be an integer from 1 to`));
  });

  it("rejects an unknown error policy", () => {
    definitionError(() => workflow("w", { onUnknownError: "ignore" as never }));
  });

  it("requires .input() before the first phase or step", () => {
    definitionError(() => workflow("w").phase("p", noop).input(z.object({})));
  });
});

describe("workflow definition: immutability", () => {
  it("gives independent workflows from a shared partial chain", () => {
    const base = workflow("w").phase("create", noop);
    const one = base.phase("two", noop).respond(respond);
    const other = base.step("two", noop).phase("three", noop).respond(respond);
    const bare = base.respond(respond);
    expect(names(one)).toEqual(["create", "two"]);
    expect(names(other)).toEqual(["create", "two", "three"]);
    expect(names(bare)).toEqual(["create"]);
    expect(one.definition.outline).toEqual(["phase:create", "phase:two"]);
    expect(other.definition.outline).toEqual(["phase:create", "step:two", "phase:three"]);
    expect(new Set([one.definition.hash, other.definition.hash, bare.definition.hash]).size).toBe(3);
  });

  it("gives the same definition hash to the same outline, and a different one after a reorder or rename", () => {
    const a = workflow("w").phase("p", noop).step("s", noop).respond(respond);
    const b = workflow("w")
      .phase("p", async () => ({ x: 1 }))
      .step("s", noop)
      .respond(respond);
    const reordered = workflow("w").step("s", noop).phase("p", noop).respond(respond);
    const kindChanged = workflow("w").phase("p", noop).phase("s", noop).respond(respond);
    expect(a.definition.hash).toBe(b.definition.hash);
    expect(reordered.definition.hash).not.toBe(a.definition.hash);
    expect(kindChanged.definition.hash).not.toBe(a.definition.hash);
  });

  it("freezes the builder, the workflow and its definition", () => {
    const builder = workflow("w").phase("p", noop);
    const wf = builder.respond(respond);
    expect(Object.isFrozen(builder)).toBe(true);
    expect(Object.isFrozen(wf)).toBe(true);
    expect(Object.isFrozen(wf.definition)).toBe(true);
    expect(Object.isFrozen(wf.definition.items)).toBe(true);
    expect(Object.isFrozen(wf.definition.outline)).toBe(true);
    expect(Object.isFrozen(wf.definition.options)).toBe(true);
    expect(() => (wf.definition.items as unknown[]).push({})).toThrow(TypeError);
  });

  it("freezes each phase and step entry, so nobody can rename an item behind the recorded outline", () => {
    const wf = workflow("w").phase("p", noop).step("s", noop).respond(respond);
    for (const item of wf.definition.items) expect(Object.isFrozen(item), `item '${item.name}'`).toBe(true);
  });

  it("is not changed by later mutation of the options objects the caller passed", () => {
    const wfOptions: { leaseMs: number } = { leaseMs: 1000 };
    const stepOptions: { retries: number } = { retries: 1 };
    const wf = workflow("w", wfOptions).step("s", noop, stepOptions).respond(respond);
    wfOptions.leaseMs = 5;
    stepOptions.retries = 99;
    expect(wf.definition.options.leaseMs).toBe(1000);
    const step = wf.definition.items[0];
    expect(step?.kind === "step" ? step.options.retries : undefined).toBe(1);
  });
});
