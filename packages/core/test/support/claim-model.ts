/**
 * The reference model of the claim state machine for one key (SPEC's
 * table), and the random scenarios that drive it: the commands three
 * attempts and an operator may issue, in batches that run concurrently.
 * `step` applies one command to the model and predicts what it returns.
 */
import fc from "fast-check";

export const ACTORS = 3;

// ---------------------------------------------------------------------------
// Commands

export type Payload = "p1" | "p2";
type Phase = "a" | "b" | "c";
export type Command =
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
export const scenario = fc.array(batch, { minLength: 1, maxLength: 20 });

// ---------------------------------------------------------------------------
// Reference model: SPEC's table, for one key.

export interface ModelRun {
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

export interface Model {
  readonly run: ModelRun | null;
  /** What each attempt believes it owns: the token and run id it got from its last claim or takeover. */
  readonly actors: readonly ({ token: string; runId: string } | null)[];
  /** Business rows written by phases whose fenced commit succeeded (all run ids). */
  readonly effects: number;
}

/** What a command returned, reduced to what the model can predict. */
export type Outcome =
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
export interface Minted {
  readonly token: string;
  readonly runId: string;
  readonly state: string;
  readonly body: string;
}

export const fingerprintOf = (p: Payload) => `fp-${p}`;
export const ownerOf = (m: Model, a: number) => m.actors[a] ?? null;

function withActor(m: Model, a: number, v: { token: string; runId: string }): Model["actors"] {
  return m.actors.map((x, i) => (i === a ? v : x));
}

/**
 * Apply `cmd` to the model: the outcome it predicts and the next model.
 * `known` is what the attempts knew when the command was sent (the start of
 * its batch): an attempt writes with the token it held then.
 */
export function step(m: Model, cmd: Command, minted: Minted, known: Model = m): { outcome: Outcome; next: Model } {
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
