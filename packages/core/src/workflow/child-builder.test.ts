import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import type { JsonValue } from "../json/json-value.js";
import type { ChildResult } from "./definition.js";
import { deployedByName } from "./versions.js";
import { workflow } from "./workflow.js";

const transfer = workflow("transfer")
  .input(z.object({ seller: z.string() }))
  .step("pay", () => ({ id: "tr-1" }))
  .respond(({ state }) => ({ status: 201, body: { transferId: state.id } }));

describe("workflow definition: .child and .map", () => {
  it("types the item's result as the child's stored response, an array in input order for map", () => {
    workflow("payout")
      .input(z.object({ sellers: z.array(z.string()) }))
      .map("transfers", transfer, ({ input }) => {
        expectTypeOf(input.sellers).toEqualTypeOf<string[]>();
        return input.sellers.map((seller) => ({ seller }));
      })
      .child("receipt", transfer, ({ state }) => {
        // The child's input is the child workflow's input type; state has the map's results already.
        expectTypeOf(state.transfers).toEqualTypeOf<ChildResult<{ transferId: string }>[]>();
        return { seller: "house" };
      })
      .respond(({ state }) => {
        expectTypeOf(state.receipt).toEqualTypeOf<ChildResult<{ transferId: string }>>();
        const first = state.transfers[0];
        if (first?.outcome === "succeeded") expectTypeOf(first.body).toEqualTypeOf<{ transferId: string }>();
        else if (first) expectTypeOf(first.body).toEqualTypeOf<JsonValue>();
        return { status: 200, body: null };
      });
    // @ts-expect-error the child's input must be the child workflow's input
    workflow("bad").child("c", transfer, () => ({ sellr: "x" }));
  });

  it("refuses unknown options naming the known ones, out-of-range values and what is not a workflow", () => {
    const err = (() => {
      try {
        workflow("o").map("m", transfer, () => [], { timeOutMs: 5 } as never);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect(String((err as Error).message)).toMatch(/timeOutMs.*concurrency.*timeoutMs|timeoutMs/);
    expect(() => workflow("o").map("m", transfer, () => [], { concurrency: 0 })).toThrow(InvalidOptionError);
    expect(() => workflow("o").map("m", transfer, () => [], { timeoutMs: 1.5 })).toThrow(InvalidOptionError);
    expect(() => workflow("o").map("m", transfer, () => [], "x" as never)).toThrow(InvalidOptionError);
    expect(() => workflow("o").child("c", {} as never, () => ({ seller: "s" }))).toThrow(WorkflowDefinitionError);
    expect(() => workflow("o").child("c", transfer, "x" as never)).toThrow(WorkflowDefinitionError);
    expect(() =>
      workflow("o")
        .phase("c", () => ({}))
        .child("c", transfer, () => ({ seller: "s" })),
    ).toThrow(WorkflowDefinitionError);
  });

  it("outlines the items by kind, and a worker given the parent runs the child workflow too", () => {
    const wf = workflow("o2")
      .child("one", transfer, () => ({ seller: "s" }))
      .map("many", transfer, () => [])
      .respond(() => ({ status: 200, body: null }));
    expect(wf.definition.outline).toEqual(["child:one", "map:many"]);
    expect([...deployedByName("startWorker", [wf]).keys()]).toEqual(["o2", "transfer"]);
  });
});
