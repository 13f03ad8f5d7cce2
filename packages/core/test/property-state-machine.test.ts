/**
 * The claim state machine under random interleavings, against real Postgres.
 *
 * Three attempts (and an operator) issue the store's own statements (claim,
 * reclaim after retention, takeover, renew, phase commit, complete, reject,
 * release, sweep) plus "time passes" (a lease or a retention period runs out),
 * in batches that run concurrently on separate connections. Every batch must
 * be explainable by some order of its commands applied to a small reference
 * model of SPEC's table: each command's result must be the model's, and the
 * row afterwards must be the model's row. On top of that:
 * - at most one attempt owns the key at any instant (the row's owner token is
 *   the model's single owner, and no two claims or takeovers both succeed);
 * - a completed record never changes (until its retention has run out);
 * - a refused call never changes a record, byte for byte;
 * - a phase's business write commits exactly when its fenced commit succeeds.
 *
 * 150 scenarios by default; IDEMPO_PROPERTY_RUNS=2000 runs more (the property
 * stops early at 25 s). A failure prints fast-check's seed and the shrunk
 * scenario, batch by batch, with what each statement returned.
 */
import fc from "fast-check";
import { sql } from "kysely";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { ClaimResult, NewRun, TakeoverResult } from "../src/store/claim.ts";
import { claimNewKey, reclaimExpiredKey, takeOverExpiredLease } from "../src/store/claim.ts";
import { sweepBatch } from "../src/store/maintenance.ts";
import { commitPhase, completeRun, deleteClaim, renewLease } from "../src/store/progress.ts";
import type { Ownership, TakenRun } from "../src/store/run-store.ts";
import { tablesIn } from "../src/store/run-store.ts";
import { releaseLease } from "../src/store/transitions.ts";
import type { TestDb } from "./support/db.ts";
import { useTestDatabase } from "./support/db.ts";
import { executorOf } from "./support/executor.ts";

const t = useTestDatabase({ pool: 8 });
const tables = tablesIn("idempo");
const TENANT = "prop";
const WORKFLOW = "prop_flow";
const OUTLINE = ["phase:a", "phase:b", "phase:c"];
/** Long enough never to run out by itself: leases end only by the "expire" and "release" commands. */
const LEASE_MS = 120_000;
const RETENTION_MS = 3_600_000;
const ACTORS = 3;
const NUM_RUNS = Number(process.env.IDEMPO_PROPERTY_RUNS ?? 150);

// ---------------------------------------------------------------------------
// Commands

type Payload = "p1" | "p2";
type Phase = "a" | "b" | "c";
type Command =
  | { kind: "claim"; actor: number; payload: Payload }
  | { kind: "reclaim"; actor: number; payload: Payload }
  | { kind: "takeover"; actor: number; payload: Payload | null }
  | { kind: "renew"; actor: number }
  | { kind: "commit"; actor: number; phase: Phase; last: boolean }
  | { kind: "complete"; actor: number; status: number }
  | { kind: "reject"; actor: number }
  | { kind: "release" }
  | { kind: "expire" }
  | { kind: "sweep" };

const actor = fc.integer({ min: 0, max: ACTORS - 1 });
const payload = fc.constantFrom<Payload>("p1", "p2");
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("claim" as const), actor, payload }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reclaim" as const), actor, payload }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("takeover" as const), actor, payload: fc.option(payload, { nil: null }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("renew" as const), actor }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("commit" as const),
      actor,
      phase: fc.constantFrom<Phase>("a", "b", "c"),
      last: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("complete" as const), actor, status: fc.constantFrom(201, 402) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reject" as const), actor }) },
  { weight: 2, arbitrary: fc.constant({ kind: "release" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "expire" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "sweep" as const }) },
);
/** Every attempt races for the key at once: the case "two owners" would come from. */
const stampede: fc.Arbitrary<Command[]> = fc
  .tuple(fc.constantFrom("claim", "takeover", "commit") as fc.Arbitrary<"claim" | "takeover" | "commit">, payload)
  .map(([kind, p]) =>
    Array.from({ length: ACTORS }, (_, a): Command => {
      if (kind === "claim") return { kind, actor: a, payload: p };
      if (kind === "takeover") return { kind, actor: a, payload: p };
      return { kind, actor: a, phase: "b", last: false };
    }),
  );
const batch = fc.oneof(
  { weight: 5, arbitrary: fc.array(command, { minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.array(command, { minLength: 2, maxLength: 3 }) },
  { weight: 1, arbitrary: stampede },
);
const scenario = fc.array(batch, { minLength: 1, maxLength: 20 });

// ---------------------------------------------------------------------------
// Reference model: SPEC's table, for one key.

interface ModelRun {
  readonly runId: string;
  readonly status: "in_flight" | "completed";
  readonly ownerToken: string | null;
  readonly leaseValid: boolean;
  readonly recoveryPoint: string | null;
  readonly fingerprint: string;
  readonly attempt: number;
  readonly state: string;
  readonly response: { status: number; body: string; outcome: "succeeded" | "failed" } | null;
  /** Completed and past retention: behaves as absent. */
  readonly expired: boolean;
  /** Phase rows in the history of this run id. */
  readonly phaseHistory: number;
}

interface Model {
  readonly run: ModelRun | null;
  /** What each attempt believes it owns: the token and run id it got from its last claim or takeover. */
  readonly actors: readonly ({ token: string; runId: string } | null)[];
  /** Business rows written by phases whose fenced commit succeeded (all run ids). */
  readonly effects: number;
}

/** What a command returned, reduced to what the model can predict. */
type Outcome =
  | { kind: "claimed" }
  | { kind: "raced" }
  | {
      kind: "existing";
      status: string;
      fingerprint: string;
      leaseValid: boolean;
      expired: boolean;
      responseStatus: number | null;
    }
  | { kind: "taken"; attempt: number; recoveryPoint: string | null; state: string }
  | { kind: "bool"; value: boolean };

/** Per execution: the fresh ids a command mints, fixed before it runs so every model order sees the same ones. */
interface Minted {
  readonly token: string;
  readonly runId: string;
  readonly state: string;
  readonly body: string;
}

const fingerprintOf = (p: Payload) => `fp-${p}`;
const ownerOf = (m: Model, a: number) => m.actors[a] ?? null;

function withActor(m: Model, a: number, v: { token: string; runId: string }): Model["actors"] {
  return m.actors.map((x, i) => (i === a ? v : x));
}

/**
 * Apply `cmd` to the model: the outcome it predicts and the next model.
 * `known` is what the attempts knew when the command was sent (the start of
 * its batch): an attempt writes with the token it held then.
 */
function step(m: Model, cmd: Command, minted: Minted, known: Model = m): { outcome: Outcome; next: Model } {
  const run = m.run;
  const refused = (outcome: Outcome = { kind: "bool", value: false }) => ({ outcome, next: m });
  const owns = (a: number) =>
    run !== null &&
    run.status === "in_flight" &&
    run.ownerToken !== null &&
    ownerOf(known, a)?.token === run.ownerToken;
  switch (cmd.kind) {
    case "claim": {
      if (run === null) {
        return {
          outcome: { kind: "claimed" },
          next: {
            ...m,
            actors: withActor(m, cmd.actor, { token: minted.token, runId: minted.runId }),
            run: freshRun(minted, cmd.payload),
          },
        };
      }
      return refused({
        kind: "existing",
        status: run.status,
        fingerprint: run.fingerprint,
        leaseValid: run.status === "in_flight" && run.leaseValid,
        expired: run.status === "completed" && run.expired,
        responseStatus: run.response?.status ?? null,
      });
    }
    case "reclaim": {
      if (run === null || run.status !== "completed" || !run.expired) return refused();
      return {
        outcome: { kind: "bool", value: true },
        next: {
          ...m,
          actors: withActor(m, cmd.actor, { token: minted.token, runId: minted.runId }),
          run: freshRun(minted, cmd.payload),
        },
      };
    }
    case "takeover": {
      if (run === null || run.status !== "in_flight" || run.leaseValid) return refused({ kind: "bool", value: false });
      if (cmd.payload !== null && fingerprintOf(cmd.payload) !== run.fingerprint) return refused();
      const attempt = run.attempt + 1;
      return {
        outcome: { kind: "taken", attempt, recoveryPoint: run.recoveryPoint, state: run.state },
        next: {
          ...m,
          actors: withActor(m, cmd.actor, { token: minted.token, runId: run.runId }),
          run: { ...run, ownerToken: minted.token, leaseValid: true, attempt },
        },
      };
    }
    case "renew":
      // Fenced on the token alone: an owner whose lease ran out but was not taken over may renew.
      if (!owns(cmd.actor) || run === null) return refused();
      return { outcome: { kind: "bool", value: true }, next: { ...m, run: { ...run, leaseValid: true } } };
    case "commit": {
      if (!owns(cmd.actor) || run === null) return refused();
      const advanced = { ...run, recoveryPoint: cmd.phase, state: minted.state, phaseHistory: run.phaseHistory + 1 };
      const next: ModelRun = cmd.last
        ? {
            ...advanced,
            status: "completed",
            ownerToken: null,
            leaseValid: false,
            response: { status: 201, body: minted.body, outcome: "succeeded" },
          }
        : { ...advanced, leaseValid: true };
      return { outcome: { kind: "bool", value: true }, next: { ...m, run: next, effects: m.effects + 1 } };
    }
    case "complete": {
      if (!owns(cmd.actor) || run === null) return refused();
      return {
        outcome: { kind: "bool", value: true },
        next: {
          ...m,
          run: {
            ...run,
            status: "completed",
            ownerToken: null,
            leaseValid: false,
            response: { status: cmd.status, body: minted.body, outcome: cmd.status < 400 ? "succeeded" : "failed" },
          },
        },
      };
    }
    case "reject":
      if (!owns(cmd.actor) || run === null || run.recoveryPoint !== null) return refused();
      return { outcome: { kind: "bool", value: true }, next: { ...m, run: null } };
    case "release":
      if (run === null || run.status !== "in_flight") return refused();
      // Release ends the lease for good: the owner token goes, so the old owner cannot renew it back.
      return {
        outcome: { kind: "bool", value: true },
        next: { ...m, run: { ...run, leaseValid: false, ownerToken: null } },
      };
    case "expire":
      if (run === null) return refused({ kind: "bool", value: true });
      return {
        outcome: { kind: "bool", value: true },
        next: { ...m, run: run.status === "in_flight" ? { ...run, leaseValid: false } : { ...run, expired: true } },
      };
    case "sweep":
      // Other keys' expired records may be swept too; only this key's fate is predicted.
      if (run !== null && run.status === "completed" && run.expired) {
        return { outcome: { kind: "bool", value: true }, next: { ...m, run: null } };
      }
      return refused({ kind: "bool", value: true });
  }
}

function freshRun(minted: Minted, p: Payload): ModelRun {
  return {
    runId: minted.runId,
    status: "in_flight",
    ownerToken: minted.token,
    leaseValid: true,
    recoveryPoint: null,
    fingerprint: fingerprintOf(p),
    attempt: 1,
    state: "{}",
    response: null,
    expired: false,
    phaseHistory: 0,
  };
}

// ---------------------------------------------------------------------------
// Running commands against Postgres

interface Row {
  run_id: string;
  status: "in_flight" | "completed";
  owner_token: string | null;
  lease_valid: boolean | null;
  recovery_point: string | null;
  fingerprint: string;
  attempt: number;
  state: string;
  response_status: number | null;
  response_body: string | null;
  outcome: string | null;
  expired: boolean | null;
  /** The whole row as text, for "unchanged, byte for byte". */
  raw: string;
}

async function readRow(db: TestDb, key: string): Promise<Row | null> {
  const { rows } = await sql<Row>`
    SELECT run_id, status, owner_token, (locked_until > clock_timestamp()) AS lease_valid, recovery_point,
           fingerprint, attempt, state::text AS state, response_status, response_body::text AS response_body,
           outcome, (expires_at <= clock_timestamp()) AS expired, row_to_json(r)::text AS raw
    FROM idempo.runs r WHERE tenant_id = ${TENANT} AND key = ${key}`.execute(db);
  return rows[0] ?? null;
}

async function countWhere(db: TestDb, table: "effects" | "history", key: string, runId: string | null) {
  const query =
    table === "effects"
      ? sql<{ n: number }>`SELECT count(*)::int AS n FROM prop_effects WHERE key = ${key}`
      : sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.run_history
          WHERE tenant_id = ${TENANT} AND key = ${key} AND run_id = ${runId} AND kind = 'phase'`;
  return (await query.execute(db)).rows[0]?.n ?? -1;
}

class LostLease extends Error {}

function ownership(m: Model, a: number, key: string): Ownership {
  const mine = ownerOf(m, a);
  // An attempt that never owned the key still tries, with a token nobody holds.
  return { tenantId: TENANT, key, runId: mine?.runId ?? "never", ownerToken: mine?.token ?? `never-${a}` };
}

function newRun(key: string, p: Payload, minted: Minted): NewRun {
  return {
    tenantId: TENANT,
    key,
    runId: minted.runId,
    workflow: WORKFLOW,
    workflowVersion: 1,
    outline: OUTLINE,
    definitionHash: "prop-hash",
    fingerprint: fingerprintOf(p),
    input: JSON.stringify({ p }),
    parsedInputHash: null,
    ownerToken: minted.token,
    leaseMs: LEASE_MS,
    retentionMs: RETENTION_MS,
    // Past retention the model's keys are absent at once, as before tombstones.
    tombstoneMs: 0,
  };
}

function toOutcome(r: ClaimResult): Outcome {
  if (r.kind !== "existing") return { kind: r.kind };
  return {
    kind: "existing",
    status: r.run.status,
    fingerprint: r.run.fingerprint,
    leaseValid: r.run.leaseRemainingMs > 0,
    expired: r.run.expired,
    responseStatus: r.run.responseStatus,
  };
}

const takenOutcome = (result: TakeoverResult | null): Outcome => {
  const r: TakenRun | null = result?.kind === "taken" ? result.run : null;
  return r
    ? { kind: "taken", attempt: r.attempt, recoveryPoint: r.recoveryPoint, state: r.state }
    : { kind: "bool", value: false };
};

/** Run one command with the model as the attempts knew it when the batch started. */
async function execute(db: TestDb, m: Model, key: string, cmd: Command, minted: Minted): Promise<Outcome> {
  const bool = (value: boolean): Outcome => ({ kind: "bool", value });
  const ex = executorOf(db);
  switch (cmd.kind) {
    case "claim":
      return toOutcome(await claimNewKey(ex, tables, newRun(key, cmd.payload, minted)));
    case "reclaim":
      return bool(await reclaimExpiredKey(ex, tables, newRun(key, cmd.payload, minted)));
    case "takeover":
      return takenOutcome(
        await takeOverExpiredLease(ex, tables, {
          tenantId: TENANT,
          key,
          ownerToken: minted.token,
          leaseMs: LEASE_MS,
          fingerprint: cmd.payload === null ? null : fingerprintOf(cmd.payload),
          // Far beyond what a scenario reaches: parking is tested on its own.
          maxAttempts: 10_000,
        }),
      );
    case "renew":
      return bool(await renewLease(ex, tables, ownership(m, cmd.actor, key), LEASE_MS));
    case "commit": {
      const own = ownership(m, cmd.actor, key);
      // As the executor does: the business write and the fenced commit share one transaction,
      // which rolls back when the commit finds the lease lost.
      try {
        await db.transaction().execute(async (tx) => {
          await sql`INSERT INTO prop_effects (key, token) VALUES (${key}, ${own.ownerToken})`.execute(tx);
          const ok = await commitPhase(executorOf(tx), tables, own, {
            name: cmd.phase,
            attempt: 0,
            state: minted.state,
            leaseMs: LEASE_MS,
            ...(cmd.last ? { response: { outcome: "succeeded", status: 201, body: minted.body } } : {}),
          });
          if (!ok) throw new LostLease();
        });
        return bool(true);
      } catch (error) {
        if (error instanceof LostLease) return bool(false);
        throw error;
      }
    }
    case "complete":
      return bool(
        await completeRun(ex, tables, ownership(m, cmd.actor, key), {
          outcome: cmd.status < 400 ? "succeeded" : "failed",
          status: cmd.status,
          body: minted.body,
        }),
      );
    case "reject":
      return bool((await deleteClaim(ex, tables, ownership(m, cmd.actor, key))) === "deleted");
    case "release":
      return bool((await releaseLease(ex, tables, { tenantId: TENANT, key })) !== null);
    case "expire":
      // Time passes for this key: its lease, or its retention, runs out (DB clock).
      await sql`
        UPDATE idempo.runs
        SET locked_until = CASE WHEN status = 'in_flight' THEN clock_timestamp() - interval '1 second' END,
            expires_at = CASE WHEN status = 'completed' THEN clock_timestamp() - interval '1 second' END
        WHERE tenant_id = ${TENANT} AND key = ${key}`.execute(db);
      return bool(true);
    case "sweep":
      await sweepBatch(ex, tables, 1_000);
      return bool(true);
  }
}

function sameOutcome(actual: Outcome, predicted: Outcome): boolean {
  return JSON.stringify(actual) === JSON.stringify(predicted);
}

function rowMatches(row: Row | null, run: ModelRun | null): boolean {
  if (run === null || row === null) return run === row;
  return (
    row.run_id === run.runId &&
    row.status === run.status &&
    row.owner_token === run.ownerToken &&
    (row.lease_valid === true) === (run.status === "in_flight" && run.leaseValid) &&
    row.recovery_point === run.recoveryPoint &&
    row.fingerprint === run.fingerprint &&
    row.attempt === run.attempt &&
    row.state === run.state &&
    row.response_status === (run.response?.status ?? null) &&
    row.response_body === (run.response?.body ?? null) &&
    row.outcome === (run.response?.outcome ?? null) &&
    (row.expired === true) === (run.status === "completed" && run.expired)
  );
}

const refusal = (o: Outcome) => o.kind === "existing" || o.kind === "raced" || (o.kind === "bool" && !o.value);

/**
 * Find an order of the batch's commands that explains every result and the
 * final row. Two allowances, both of which change nothing: a claim may
 * report `raced` (ask again) when another command of the same batch created
 * or deleted the row under it; and the sweeper skips a row another command
 * holds locked (SKIP LOCKED), so in a concurrent batch a sweep may leave an
 * expired record for its next round.
 */
function explain(
  m: Model,
  cmds: readonly Command[],
  minted: readonly Minted[],
  actual: readonly Outcome[],
  row: Row | null,
): { model: Model; refusedAll: boolean } | null {
  const existenceChanged = (i: number) =>
    actual.some(
      (o, j) =>
        j !== i &&
        ((o.kind === "claimed" && cmds[j]?.kind === "claim") ||
          (o.kind === "bool" && o.value && (cmds[j]?.kind === "reject" || cmds[j]?.kind === "reclaim"))),
    );
  const concurrent = cmds.length > 1;
  const search = (model: Model, rest: readonly number[]): Model | null => {
    if (rest.length === 0) return rowMatches(row, model.run) ? model : null;
    for (const i of rest) {
      const others = rest.filter((j) => j !== i);
      const cmd = cmds[i] as Command;
      const got = actual[i] as Outcome;
      const { outcome, next } = step(model, cmd, minted[i] as Minted, m);
      const candidates: Model[] = [];
      if (got.kind === "raced" && cmd.kind === "claim" && existenceChanged(i)) candidates.push(model);
      else if (sameOutcome(got, outcome)) {
        candidates.push(next);
        if (cmd.kind === "sweep" && concurrent && next !== model) candidates.push(model);
      }
      for (const candidate of candidates) {
        const found = search(candidate, others);
        if (found) return found;
      }
    }
    return null;
  };
  const model = search(
    m,
    cmds.map((_, i) => i),
  );
  return model ? { model, refusedAll: actual.every(refusal) } : null;
}

// ---------------------------------------------------------------------------

let scenarioNo = 0;

async function runScenario(db: TestDb, batches: readonly (readonly Command[])[]): Promise<void> {
  const key = `k${++scenarioNo}-${ulid()}`;
  let model: Model = { run: null, actors: Array.from({ length: ACTORS }, () => null), effects: 0 };
  const trace: string[] = [];
  for (const cmds of batches) {
    const before = await readRow(db, key);
    const minted = cmds.map(
      (): Minted => ({
        token: ulid(),
        runId: ulid(),
        state: JSON.stringify({ s: ulid() }),
        body: JSON.stringify({ b: ulid() }),
      }),
    );
    const start = model;
    const actual = await Promise.all(cmds.map((c, i) => execute(db, start, key, c, minted[i] as Minted)));
    const row = await readRow(db, key);
    trace.push(
      `${cmds.map((c) => JSON.stringify(c)).join(" || ")}  =>  ${actual.map((a) => JSON.stringify(a)).join(" || ")}`,
    );
    const found = explain(model, cmds, minted, actual, row);
    const context = () => `key ${key}\n${trace.join("\n")}\nrow: ${row?.raw ?? "absent"}`;
    if (!found) throw new Error(`no order of the last batch matches the model\n${context()}`);
    model = found.model;

    // At most one owner: the row's owner token is exactly the one attempt the model says owns it
    // (none after a release, which ends the lease without handing it to anyone).
    const owners = model.actors.filter((a) => a !== null && row?.owner_token === a.token);
    if (owners.length !== (row?.status === "in_flight" && row.owner_token !== null ? 1 : 0)) {
      throw new Error(`${owners.length} attempts hold the owner token\n${context()}`);
    }
    // A refused call never changes a record; a completed one never changes until its retention ran out.
    if (found.refusedAll && before?.raw !== row?.raw) {
      throw new Error(`a batch of refused calls changed the record\nbefore: ${before?.raw}\n${context()}`);
    }
    const timePassed = cmds.some((c) => c.kind === "expire");
    if (before?.status === "completed" && before.expired !== true && !timePassed && before.raw !== row?.raw) {
      throw new Error(`a completed record changed\nbefore: ${before.raw}\n${context()}`);
    }
    // Business writes commit with their phase and only then; the history counts the same commits.
    const effects = await countWhere(db, "effects", key, null);
    if (effects !== model.effects)
      throw new Error(`${effects} phase writes persisted, expected ${model.effects}\n${context()}`);
    if (model.run) {
      const history = await countWhere(db, "history", key, model.run.runId);
      if (history !== model.run.phaseHistory) {
        throw new Error(`${history} phase history rows, expected ${model.run.phaseHistory}\n${context()}`);
      }
    }
  }
  // A passed scenario leaves nothing behind, so the next one's sweep has only its own key to find.
  await sql`DELETE FROM idempo.runs WHERE tenant_id = ${TENANT} AND key = ${key}`.execute(db);
}

describe("claim state machine: random interleavings against the reference model", () => {
  it(`holds for ${NUM_RUNS} random scenarios of concurrent claim, takeover, renew, commit, complete, reject, release, expire and sweep`, async () => {
    await sql`CREATE TABLE IF NOT EXISTS prop_effects (key text NOT NULL, token text NOT NULL)`.execute(t.db);
    await fc.assert(
      fc.asyncProperty(scenario, (batches) => runScenario(t.db, batches)),
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: 25_000, markInterruptAsFailure: false },
    );
  }, 300_000);

  it("the model itself: SPEC's rows for a claim on each key state", () => {
    const minted: Minted = { token: "t1", runId: "r1", state: "{}", body: "{}" };
    const empty: Model = { run: null, actors: [null, null, null], effects: 0 };
    const claimed = step(empty, { kind: "claim", actor: 0, payload: "p1" }, minted);
    expect(claimed.outcome).toEqual({ kind: "claimed" });
    // In flight, lease valid: 409 for the same payload, 422 for another (both "existing", nothing changes).
    const again = step(claimed.next, { kind: "claim", actor: 1, payload: "p2" }, { ...minted, token: "t2" });
    expect(again.outcome).toMatchObject({ kind: "existing", leaseValid: true, fingerprint: "fp-p1" });
    expect(again.next).toBe(claimed.next);
    // Lease expired: a takeover with another payload is refused; with the same one it wins.
    const expired = step(claimed.next, { kind: "expire" }, minted).next;
    expect(step(expired, { kind: "takeover", actor: 1, payload: "p2" }, minted).outcome).toEqual({
      kind: "bool",
      value: false,
    });
    const taken = step(expired, { kind: "takeover", actor: 1, payload: "p1" }, { ...minted, token: "t3" });
    expect(taken.outcome).toMatchObject({ kind: "taken", attempt: 2 });
    // The old owner is fenced out.
    expect(step(taken.next, { kind: "commit", actor: 0, phase: "a", last: false }, minted).outcome).toEqual({
      kind: "bool",
      value: false,
    });
  });
});
