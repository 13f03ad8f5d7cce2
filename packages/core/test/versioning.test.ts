import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine, Workflow } from "../src/index.ts";
import {
  createEngine,
  IdempotencyKeyMismatchError,
  InvalidOptionError,
  WorkflowDefinitionError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 10 });
const input = { cartId: "c1", amountCents: 500 };
const schema = z.object({ cartId: z.string(), amountCents: z.number().int().positive() });

/** What each version's code did, as "<version>:<item>:<key>" in call order. */
type Trace = string[];

/** Version 1: create, charge, record. */
function orderV1(trace: Trace) {
  return workflow("order")
    .input(schema)
    .phase("create", ({ key }) => {
      trace.push(`v1:create:${key}`);
      return { orderId: `o-${key}` };
    })
    .step("charge", ({ key, idempotencyKey }) => {
      trace.push(`v1:charge:${key}`);
      return { chargeId: `ch-${idempotencyKey.slice(0, 8)}` };
    })
    .phase("record", ({ key }) => {
      trace.push(`v1:record:${key}`);
      return {};
    })
    .respond(({ state }) => ({ status: 201, body: { version: 1, orderId: state.orderId } }));
}

/**
 * Version 2 with the same outline as version 1 (create, charge, record) and
 * different code in every item: only the stored version number can tell
 * which code a run started on.
 */
function orderV2(trace: Trace, replaces: readonly Workflow<unknown, unknown>[]) {
  return workflow("order")
    .version(2)
    .replaces(...replaces)
    .input(schema)
    .phase("create", ({ key }) => {
      trace.push(`v2:create:${key}`);
      return { orderId: `o2-${key}`, currency: "EUR" };
    })
    .step("charge", ({ key, state }) => {
      trace.push(`v2:charge:${key}`);
      return { chargeId: `ch2-${state.currency}` };
    })
    .phase("record", ({ key }) => {
      trace.push(`v2:record:${key}`);
      return {};
    })
    .respond(({ state }) => ({
      status: 201,
      body: { version: 2, orderId: state.orderId, currency: state.currency ?? null },
    }));
}

/** Version 2 that renames `charge` to `pay` and adds `notify`: a v1 run past `charge` has no place in it. */
function orderV2Renamed(trace: Trace, replaces: readonly Workflow<unknown, unknown>[] = []) {
  return workflow("order")
    .version(2)
    .replaces(...replaces)
    .input(schema)
    .phase("create", ({ key }) => {
      trace.push(`v2:create:${key}`);
      return { orderId: `o2-${key}` };
    })
    .step("pay", ({ key }) => {
      trace.push(`v2:pay:${key}`);
      return { chargeId: "pay" };
    })
    .phase("record", ({ key }) => {
      trace.push(`v2:record:${key}`);
      return {};
    })
    .phase("notify", ({ key }) => {
      trace.push(`v2:notify:${key}`);
      return {};
    })
    .respond(({ state }) => ({ status: 201, body: { version: 2, orderId: state.orderId } }));
}

/** Run `wf` on `key` and crash it at `point`, then release it so the next retry takes it over at once. */
async function stopAt(engine: Engine, wf: Workflow<unknown, unknown>, key: string, point: string): Promise<void> {
  setFaultHook(engine, (p) => {
    if (p === point) throw new CrashSignal(p);
  });
  await expect(engine.runOnce(wf, { tenantId: "ver", key, input })).rejects.toBeInstanceOf(CrashSignal);
  setFaultHook(engine, undefined);
  await engine.release("ver", key);
}

describe("a run finishes on the version it started under", () => {
  it("a v1 run stopped mid-way finishes on v1's code under runOnce(v2); a new key takes v2", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "k1", "after:phase:create");
    expect(await engine.inspect("ver", "k1")).toMatchObject({ workflowVersion: 1, recoveryPoint: "create" });

    // The deploy: only v2 is given to runOnce, and it keeps v1 deployed.
    const v2 = orderV2(trace, [v1]);
    const resumed = await engine.runOnce(v2, { tenantId: "ver", key: "k1", input });
    expect(resumed).toMatchObject({ status: 201, replayed: false, body: { version: 1, orderId: "o-k1" } });
    expect(trace).toEqual(["v1:create:k1", "v1:charge:k1", "v1:record:k1"]);

    const fresh = await engine.runOnce(v2, { tenantId: "ver", key: "k2", input });
    expect(fresh).toMatchObject({ status: 201, body: { version: 2, orderId: "o2-k2", currency: "EUR" } });
    expect(trace.slice(3)).toEqual(["v2:create:k2", "v2:charge:k2", "v2:record:k2"]);
    expect(await engine.inspect("ver", "k1")).toMatchObject({ status: "completed", workflowVersion: 1 });
    expect(await engine.inspect("ver", "k2")).toMatchObject({ status: "completed", workflowVersion: 2 });
  });

  it("the same outline is not enough: without v1 deployed, the v1 run is finished by v2's code", async () => {
    // The other side of the test above: what keeping v1 deployed changes.
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "k3", "after:phase:create");
    const v2alone = orderV2(trace, []);
    const res = await engine.runOnce(v2alone, { tenantId: "ver", key: "k3", input });
    // v2's charge found no currency in the state v1's create wrote: why old versions stay deployed.
    expect(res.body).toEqual({ version: 2, orderId: "o-k3", currency: null });
    expect(trace).toEqual(["v1:create:k3", "v2:charge:k3", "v2:record:k3"]);
  });

  it("the fingerprint does not depend on the version: retries after a deploy resume or replay, other payloads get 422", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "f1", "after:step:charge");
    const v2 = orderV2Renamed(trace, [v1]);
    await expect(
      engine.runOnce(v2, { tenantId: "ver", key: "f1", input: { ...input, amountCents: 501 } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyMismatchError);
    const resumed = await engine.runOnce(v2, { tenantId: "ver", key: "f1", input });
    expect(resumed).toMatchObject({ status: 201, replayed: false, body: { version: 1 } });
    // A completed v1 run replays its stored v1 answer to the new version, byte for byte.
    const replay = await engine.runOnce(v2, { tenantId: "ver", key: "f1", input: { amountCents: 500, cartId: "c1" } });
    expect(replay).toEqual({ ...resumed, replayed: true });
    await expect(
      engine.runOnce(v2, { tenantId: "ver", key: "f1", input: { ...input, cartId: "c2" } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(trace).toEqual(["v1:create:f1", "v1:charge:f1", "v1:record:f1"]);
  });

  it("a worker given [v2, v1] resumes runs of both versions, each on its own code", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const v2 = orderV2(trace, []); // same outline as v1: only the stored version tells the runs apart
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "w1", "after:step:charge");
    await stopAt(engine, v2, "w2", "after:step:charge");
    trace.length = 0;
    const worker = engine.startWorker({ workflows: [v2, v1], intervalMs: 20, sweep: false });
    try {
      for (const key of ["w1", "w2"]) {
        await waitFor(
          async () => ((await engine.inspect("ver", key))?.status === "completed" ? true : undefined),
          30_000,
        );
      }
    } finally {
      await worker.stop();
    }
    expect([...trace].sort()).toEqual(["v1:record:w1", "v2:record:w2"]);
    expect((await engine.inspect("ver", "w1"))?.response?.body).toEqual({ version: 1, orderId: "o-w1" });
    expect((await engine.inspect("ver", "w2"))?.response?.body).toEqual({
      version: 2,
      orderId: "o2-w2",
      currency: "EUR",
    });
  });

  it("resumeStale takes the versions a workflow replaces, as if they were listed", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "r1", "after:step:charge");
    const report = await engine.resumeStale({ workflows: [orderV2Renamed(trace, [v1])] });
    expect(report.failed).toEqual([]);
    expect(report.resumed).toEqual([
      { tenantId: "ver", key: "r1", workflow: "order", status: 201, outcome: "succeeded" },
    ]);
    expect(trace).toEqual(["v1:create:r1", "v1:charge:r1", "v1:record:r1"]);
  });

  it("a run whose version is gone resumes under the newest version that has its recovery point and the same items after it", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "g1", "after:step:charge");
    // Version 2 adds an audit phase before the recovery point; what follows `charge` is unchanged.
    const v2 = workflow("order")
      .version(2)
      .input(schema)
      .phase("audit", () => ({}))
      .phase("create", () => ({ orderId: "never" }))
      .step("charge", () => ({ chargeId: "never" }))
      .phase("record", ({ key }) => {
        trace.push(`v2:record:${key}`);
        return {};
      })
      .respond(({ state }) => ({ status: 201, body: { version: 2, orderId: state.orderId } }));
    const res = await engine.runOnce(v2, { tenantId: "ver", key: "g1", input });
    expect(res.body).toEqual({ version: 2, orderId: "o-g1" });
    expect(trace).toEqual(["v1:create:g1", "v1:charge:g1", "v2:record:g1"]);
  });
});

describe("a stored run no deployed version can finish", () => {
  it("raises WorkflowDefinitionError naming the run's version and every deployed one, and calls nothing", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const engine = createEngine({ db: t.db });
    await stopAt(engine, v1, "e1", "after:step:charge");
    trace.length = 0;
    const v2 = orderV2Renamed(trace); // forgot .replaces(v1)
    const error = await engine.runOnce(v2, { tenantId: "ver", key: "e1", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    const message = String((error as Error).message);
    expect(message).toContain("recovery point 'charge'");
    expect(message).toContain("version 1 [phase:create, step:charge, phase:record]");
    expect(message).toContain("version 2 [phase:create, step:pay, phase:record, phase:notify]");
    expect(message).toContain(".replaces(...) of version 2");
    expect(trace).toEqual([]);
    expect(await engine.inspect("ver", "e1")).toMatchObject({
      status: "in_flight",
      recoveryPoint: "charge",
      workflowVersion: 1,
    });

    await engine.release("ver", "e1");
    const report = await engine.resumeStale({ workflows: [v2] });
    expect(report.resumed).toEqual([]);
    expect(report.failed.map((f) => [f.key, f.error.constructor])).toEqual([["e1", WorkflowDefinitionError]]);

    // Deploying v1 next to v2 lets the run finish.
    await engine.release("ver", "e1");
    const res = await engine.runOnce(orderV2Renamed(trace, [v1]), { tenantId: "ver", key: "e1", input });
    expect(res.body).toEqual({ version: 1, orderId: "o-e1" });
    expect(trace).toEqual(["v1:record:e1"]);
  });

  it("a run of a version newer than every deployed one (a rollback) names the way back", async () => {
    const trace: Trace = [];
    const engine = createEngine({ db: t.db });
    await stopAt(engine, orderV2Renamed(trace), "e2", "after:step:pay");
    const error = await engine.runOnce(orderV1(trace), { tenantId: "ver", key: "e2", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(String((error as Error).message)).toMatch(
      /version 2 \[phase:create, step:pay, .*deployed: version 1 \[.*newer than the deployed ones.*version 3 with \.replaces\(v2\)/,
    );
  });

  it("an older version never finishes a newer version's run, even with the same outline (a rolling deploy)", async () => {
    const trace: Trace = [];
    const v1 = orderV1(trace);
    const v2 = orderV2(trace, [v1]);
    const oldProcess = createEngine({ db: t.db });
    await stopAt(oldProcess, v2, "e4", "after:phase:create");
    trace.length = 0;
    // A process still on the old code meets the run a new process started.
    const error = await oldProcess.runOnce(v1, { tenantId: "ver", key: "e4", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(String((error as Error).message)).toMatch(/a process with version 2 will take the run/);
    expect(trace).toEqual([]);
    await oldProcess.release("ver", "e4");
    const res = await createEngine({ db: t.db }).runOnce(v2, { tenantId: "ver", key: "e4", input });
    expect(res.body).toEqual({ version: 2, orderId: "o2-e4", currency: "EUR" });
    expect(trace).toEqual(["v2:charge:e4", "v2:record:e4"]);
  });

  it("a version edited in place says so", async () => {
    const trace: Trace = [];
    const engine = createEngine({ db: t.db });
    await stopAt(engine, orderV1(trace), "e3", "after:step:charge");
    const edited = workflow("order")
      .input(schema)
      .phase("create", () => ({}))
      .step("pay", () => ({}))
      .phase("record", () => ({}))
      .respond(() => ({ status: 201, body: {} }));
    const error = await engine.runOnce(edited, { tenantId: "ver", key: "e3", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(String((error as Error).message)).toMatch(/Version 1 was changed in place.*version\(2\)\.replaces\(v1\)/);
  });
});

describe("version numbers and replaced versions are checked when the workflow is built", () => {
  const v1 = orderV1([]);

  it.each([0, -1, 1.5, Number.NaN, 2 ** 31, "2", null])("rejects version %s", (bad) => {
    expect(() => workflow("order").version(bad as number)).toThrow(WorkflowDefinitionError);
    expect(() => workflow("order").version(bad as number)).toThrow(/version must be an integer from 1 to 2147483647/);
  });

  it("accepts the bounds and stores the version on the workflow", () => {
    expect(v1.version).toBe(1);
    expect(orderV2([] as Trace, [v1]).version).toBe(2);
    const top = workflow("order")
      .version(2_147_483_647)
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: {} }));
    expect(top.version).toBe(2_147_483_647);
  });

  it("rejects setting the version twice", () => {
    expect(() => workflow("order").version(2).version(3)).toThrow(/version is already 2/);
  });

  const finish = (b: ReturnType<typeof workflow>) =>
    b.phase("a", () => ({})).respond(() => ({ status: 200, body: {} }));

  it("rejects replacing the same or a higher version", () => {
    const v2 = orderV2([], [v1]);
    const v3 = finish(workflow("order").version(3));
    expect(() => finish(workflow("order").version(2).replaces(v2))).toThrow(WorkflowDefinitionError);
    expect(() => finish(workflow("order").version(2).replaces(v2))).toThrow(/a replaced version must be lower/);
    expect(() => finish(workflow("order").replaces(v1))).toThrow(/version 1 cannot replace version 1/);
    expect(() => finish(workflow("order").version(2).replaces(v3))).toThrow(/version 2 cannot replace version 3/);
    // A version that replaces a higher one only through what it replaces is caught too.
    expect(() =>
      finish(
        workflow("order")
          .version(3)
          .replaces(finish(workflow("order").version(2)), v3),
      ),
    ).toThrow(/version 3 cannot replace version 3/);
  });

  it("rejects two different definitions with one version number, also reached through what a version replaces", () => {
    const otherV1 = orderV1([]);
    expect(() => finish(workflow("order").version(3).replaces(v1, otherV1))).toThrow(
      /replaces two different definitions numbered 1/,
    );
    const v2 = orderV2([], [v1]);
    expect(() => finish(workflow("order").version(3).replaces(v2, otherV1))).toThrow(WorkflowDefinitionError);
    // The same definition reached twice is one version.
    const v3 = finish(workflow("order").version(3).replaces(v2, v1));
    expect(v3.definition.replaces.map((d) => d.version)).toEqual([2, 1]);
  });

  it("rejects another workflow's definition and things that are not workflows", () => {
    const other = workflow("refund")
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: {} }));
    expect(() => finish(workflow("order").version(2).replaces(other))).toThrow(/cannot replace workflow 'refund'/);
    expect(() =>
      finish(
        workflow("order")
          .version(2)
          .replaces({} as never),
      ),
    ).toThrow(/replaces\(\.\.\.\)\[0\] is not a workflow/);
  });

  it("resumeStale and startWorker refuse two different definitions of one version", async () => {
    const engine = createEngine({ db: t.db });
    const v2 = orderV2([], [v1]);
    const otherV1 = orderV1([]);
    await expect(engine.resumeStale({ workflows: [v2, otherV1] })).rejects.toBeInstanceOf(InvalidOptionError);
    expect(() => engine.startWorker({ workflows: [v2, otherV1] })).toThrow(
      /two different definitions of workflow 'order' version 1/,
    );
    // The same definition listed and replaced counts once.
    await expect(engine.resumeStale({ workflows: [v2, v1] })).resolves.toMatchObject({ failed: [] });
  });
});
