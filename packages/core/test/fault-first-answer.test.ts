/**
 * Fault kind "first answer is not the stored JSON": the caller whose
 * request ran the workflow must get exactly what every replay gets, the
 * response body after its JSON round trip, not the object `respond`
 * returned. Otherwise a `Date` is a `Date` for the first caller and a
 * string for the retry, `-0` stays `-0`, and an `undefined` field is
 * present for one and absent for the other: the first answer and the
 * replay differ. (Objects with their own `toJSON`, and class instances,
 * are refused as unstorable before anything commits, so they cannot differ.)
 * The same holds for state: what a phase returns is what the next item
 * sees after the round trip, in the first attempt as after a takeover.
 */
import { describe, expect, it } from "vitest";
import type { RunResult } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const AT = new Date("2026-03-04T05:06:07.089Z");

/** What `respond` returns: every value whose JSON form differs from the value itself. */
function awkwardBody() {
  return {
    at: AT,
    negativeZero: -0,
    missing: undefined,
    list: [AT, undefined, -0],
    nested: { at: AT, items: [{ at: AT, gone: undefined }] },
  };
}

/** The body as JSON gives it back: what a replay returns. */
const STORED = JSON.parse(JSON.stringify(awkwardBody()));

function expectJsonShape(body: unknown): void {
  expect(body).toStrictEqual(STORED);
  const b = body as Record<string, unknown>;
  expect(typeof b.at).toBe("string");
  expect(typeof (b.nested as { at: unknown }).at).toBe("string");
  expect(Object.is(b.negativeZero, -0)).toBe(false);
  expect("missing" in b).toBe(false);
  expect((b.list as unknown[])[1]).toBeNull();
}

async function firstAndReplay(wf: Parameters<ReturnType<typeof createEngine>["runOnce"]>[0], key: string) {
  const engine = createEngine({ db: t.db });
  const first: RunResult<unknown> = await engine.runOnce(wf, { tenantId: "fa", key, input: {} });
  const replay: RunResult<unknown> = await engine.runOnce(wf, { tenantId: "fa", key, input: {} });
  return { first, replay };
}

describe("the first caller gets the stored JSON round trip, exactly as a replay", () => {
  it("respond after a phase: Date, -0 and undefined come out as JSON", async () => {
    const wf = workflow("fa_phase")
      .phase("only", () => ({ done: true }))
      .respond(() => ({ status: 201, body: awkwardBody() }));
    const { first, replay } = await firstAndReplay(wf, "phase");
    expect(first.replayed).toBe(false);
    expect(replay.replayed).toBe(true);
    expectJsonShape(first.body);
    expect(first.body).toStrictEqual(replay.body);
  });

  it("respond after a step", async () => {
    const wf = workflow("fa_step")
      .step("only", () => ({ done: true }))
      .respond(() => ({ status: 200, body: awkwardBody() }));
    const { first, replay } = await firstAndReplay(wf, "step");
    expectJsonShape(first.body);
    expect(first.body).toStrictEqual(replay.body);
  });

  it("ctx.fail's body", async () => {
    const wf = workflow("fa_fail")
      .phase("only", ({ fail }) => fail(402, awkwardBody()))
      .respond(() => ({ status: 200, body: {} }));
    const { first, replay } = await firstAndReplay(wf, "fail");
    expect(first).toMatchObject({ status: 402, outcome: "failed" });
    expectJsonShape(first.body);
    expect(first.body).toStrictEqual(replay.body);
  });

  it("a phase's result is state as JSON for the next item and for respond", async () => {
    const seen: unknown[] = [];
    const wf = workflow("fa_state")
      .phase("mint", () => ({ at: AT, zero: -0, nested: [AT, undefined] }))
      .step("look", ({ state }) => {
        seen.push(state);
        return {};
      })
      .respond(({ state }) => {
        seen.push(state);
        return { status: 200, body: { state } };
      });
    const { first, replay } = await firstAndReplay(wf, "state");
    const asJson = { at: AT.toISOString(), zero: 0, nested: [AT.toISOString(), null] };
    expect(seen).toHaveLength(2);
    for (const state of seen) {
      expect(state).toStrictEqual(asJson);
      expect(Object.is((state as { zero: number }).zero, -0)).toBe(false);
    }
    expect(first.body).toStrictEqual({ state: asJson });
    expect(first.body).toStrictEqual(replay.body);
  });
});
