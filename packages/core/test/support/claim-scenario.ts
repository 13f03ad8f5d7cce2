/**
 * Running the claim model's commands against real Postgres with the store's
 * own statements, and checking each batch against the model: some order of
 * its commands must explain every result and the row afterwards, with at
 * most one owner, refused calls and completed records unchanged, and phase
 * writes committed exactly with their fenced commit.
 */
import { sql } from "kysely";
import { ulid } from "ulid";
import type { ClaimResult, NewRun, TakeoverResult } from "../../src/store/claim.ts";
import { claimNewKey, reclaimExpiredKey, takeOverExpiredLease } from "../../src/store/claim.ts";
import { sweepBatch } from "../../src/store/maintenance.ts";
import { commitPhase, completeRun, deleteClaim, renewLease } from "../../src/store/progress.ts";
import type { Ownership, TakenRun } from "../../src/store/run-store.ts";
import { tablesIn } from "../../src/store/run-store.ts";
import { releaseLease } from "../../src/store/transitions.ts";
import type { Command, Minted, Model, ModelRun, Outcome, Payload } from "./claim-model.ts";
import { ACTORS, fingerprintOf, ownerOf, step } from "./claim-model.ts";
import type { TestDb } from "./db.ts";
import { executorOf } from "./executor.ts";

const tables = tablesIn("idempo");
const TENANT = "prop";
const WORKFLOW = "prop_flow";
const OUTLINE = ["phase:a", "phase:b", "phase:c"];
/** Long enough never to run out by itself: leases end only by the "expire" and "release" commands. */
const LEASE_MS = 120_000;
const RETENTION_MS = 3_600_000;

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

export async function runScenario(db: TestDb, batches: readonly (readonly Command[])[]): Promise<void> {
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
