/**
 * Every check `pnpm model` and the tests run: the model as the engine is
 * written must pass each; each broken variant (one guard removed) must fail
 * with the property it names.
 */
import type { CheckSpec } from "./spin.js";

export interface Configuration {
  readonly name: string;
  readonly defines: readonly string[];
  /** In words, for the report and docs/reliability.md. */
  readonly size: string;
}

/** The six scenarios at the sizes the suite checks. */
export const CONFIGURATIONS: readonly Configuration[] = [
  {
    name: "race",
    defines: ["RACE", "CRASHES=2", "MAX_ATTEMPTS=3"],
    size: "2 clients + 1 resumer, 2 crashes, maxAttempts 3",
  },
  {
    name: "retention",
    defines: ["RETENTION", "CRASHES=1", "MAX_ATTEMPTS=2"],
    size: "2 clients + 1 resumer + sweeper, retention may pass, 1 crash, maxAttempts 2",
  },
  {
    name: "operator",
    defines: ["OPERATOR", "CRASHES=2", "MAX_ATTEMPTS=3"],
    size: "1 client + 1 resumer + 1 operator verb, 2 crashes, maxAttempts 3",
  },
  {
    name: "schedule",
    defines: ["SCHEDULE", "CRASHES=1", "TICKS=3"],
    size: "1 schedule, 2 workers firing it + 1 redefinition, 3 ticks, 1 crash",
  },
  {
    name: "child",
    defines: ["CHILD", "CRASHES=3"],
    size: "1 parent starting 2 children, 2 workers on it + child worker + sweeper, 3 crashes",
  },
  {
    name: "slots",
    defines: ["SLOTS", "CRASHES=2"],
    size: "3 workers sharing 2 concurrency slots, 2 crashes (dead for good), 1 paused holder",
  },
];

export interface Variant {
  /** The preprocessor switch that removes the guard. */
  readonly define: string;
  /** The guard it removes, in the engine's terms. */
  readonly removes: string;
  readonly configuration: string;
  readonly mode: CheckSpec["mode"];
  /** The property spin must report: a ghost bit for assertions, or the liveness property. */
  readonly expect: { kind: "assertion"; property: string } | { kind: "acceptance cycle" };
}

export const VARIANTS: readonly Variant[] = [
  {
    define: "V_COMMIT_NO_TOKEN",
    removes: "owner_token = $token on the phase commit",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "single_writer" },
  },
  {
    define: "V_TAKEOVER_NO_LEASE",
    removes: "locked_until <= clock_timestamp() on the takeover",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "one_owner" },
  },
  {
    define: "V_SWEEP_NO_RECHECK",
    removes: "the sweep DELETE's re-check of status = 'completed' and expires_at",
    configuration: "retention",
    mode: "safety",
    expect: { kind: "assertion", property: "intent_kept" },
  },
  {
    define: "V_RESUME_FROM_START",
    removes: "resuming after the recovery point the takeover returned",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "phase_once" },
  },
  {
    define: "V_CANCEL_COMPLETED",
    removes: "cancel's refusal of a completed run",
    configuration: "operator",
    mode: "safety",
    expect: { kind: "assertion", property: "response_stable" },
  },
  {
    define: "V_KEY_PER_ATTEMPT",
    removes: "a derived key built from (tenant, key, workflow, step) only",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "derived_key_stable" },
  },
  {
    define: "V_TAKEOVER_NO_STATUS",
    removes: "status = 'in_flight' on the takeover",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "terminal_never_taken" },
  },
  {
    define: "V_CLAIM_UPSERT",
    removes: "ON CONFLICT DO NOTHING on the claim (an upsert instead)",
    configuration: "race",
    mode: "safety",
    expect: { kind: "assertion", property: "refusal_read_only" },
  },
  {
    define: "V_NO_PARK",
    removes: "parking at maxAttempts on the takeover",
    configuration: "race",
    mode: "liveness",
    expect: { kind: "acceptance cycle" },
  },
  {
    define: "V_RELEASE_KEEPS_TOKEN",
    removes: "release clearing the owner token (expireLease on this branch only moves locked_until)",
    configuration: "operator",
    mode: "safety",
    expect: { kind: "assertion", property: "single_writer" },
  },
  {
    define: "V_TICK_KEY_PER_WORKER",
    removes: "a tick's run key of (schedule name, tick time) only: here the worker is in it",
    configuration: "schedule",
    mode: "safety",
    expect: { kind: "assertion", property: "tick_one_run" },
  },
  {
    define: "V_TICK_APART",
    removes: "the runs of the ticks and the row's move past them in one transaction",
    configuration: "schedule",
    mode: "safety",
    expect: { kind: "assertion", property: "tick_one_run" },
  },
  {
    define: "V_CHILD_APART",
    removes: "the children created in the transaction that records the item's start: here in the next one",
    configuration: "child",
    mode: "safety",
    expect: { kind: "assertion", property: "child_kept" },
  },
  {
    define: "V_CHILD_KEY_PER_ATTEMPT",
    removes: "a child's key derived from (tenant, parent key, item, index) only: here the attempt is in it",
    configuration: "child",
    mode: "safety",
    expect: { kind: "assertion", property: "children_found" },
  },
  {
    define: "V_SWEEP_WAITING_CHILD",
    removes: "the sweep's keeping of a child whose parent has not completed",
    configuration: "child",
    mode: "safety",
    expect: { kind: "assertion", property: "child_not_swept" },
  },
  {
    define: "V_SLOT_NO_LOCK",
    removes: "the slot's lock (FOR UPDATE SKIP LOCKED) and its holder read again: a read, then a write",
    configuration: "slots",
    mode: "safety",
    expect: { kind: "assertion", property: "slot_one_owner" },
  },
  {
    define: "V_SLOT_NOT_LEASE",
    removes: "a slot held only under a live lease (slot_holder_live): here while the run is in flight",
    configuration: "slots",
    mode: "liveness",
    expect: { kind: "acceptance cycle" },
  },
  {
    define: "V_SLOT_COMMIT_UNFENCED",
    removes:
      "the slot's check in a holder's phase commit (advance_run, migration 0022): fenced by the owner token alone, a holder paused past its lease whose slot was taken is live again beside the new holder",
    configuration: "slots",
    mode: "safety",
    expect: { kind: "assertion", property: "at_most_max" },
  },
];

/**
 * Open findings: a switch that adds what the engine does as written, which
 * the scenario's configuration leaves out because spin finds it breaks a
 * property. The tests ask that spin still finds it; once the engine is
 * changed, the switch goes into the configuration and the finding is removed.
 */
export const FINDINGS: readonly Variant[] = [];

function configuration(name: string): Configuration {
  const found = CONFIGURATIONS.find((c) => c.name === name);
  if (!found) throw new Error(`no configuration '${name}'`);
  return found;
}

export function variantSpec(v: Variant): CheckSpec {
  return { defines: [...configuration(v.configuration).defines, v.define], mode: v.mode };
}
