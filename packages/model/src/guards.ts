/**
 * The guards the model assumes, row by row: each model transition, the
 * source function it stands for, and the text that function must contain.
 * test/guard-sync.test.ts reads the sources and fails when a pattern is
 * gone, so the model cannot drift from the SQL unnoticed. To add a row,
 * name the file (relative to packages/core/src), the function, and the
 * patterns; whitespace in patterns and sources is compared collapsed, and
 * `@{x}` in a pattern stands for the query parameter `${x}` of the sql tag.
 * The hot-path statements are PL/pgSQL functions, read from the current
 * schema file (migrations/current/schema.sql, named relative to
 * packages/core/src too, which a core test keeps equal to what the
 * migrations build): there `fn` is the SQL function, read from its CREATE
 * FUNCTION to the `$$;` that closes it (the first form of an overloaded one,
 * the current), and the store function that calls it has a row of its own.
 */
export interface GuardRow {
  readonly transition: string;
  readonly file: string;
  readonly fn: string;
  readonly patterns: readonly string[];
}

/** The fence every write of a run carries. */
const FENCE = "owner_token = @{own.ownerToken} AND status = 'in_flight'";
/** The same fence in the statement functions of the migration. */
const SQL_FENCE = "owner_token = p_owner_token AND status = 'in_flight'";
/** The current schema, which holds the hot-path statements as functions as they are now. */
const FUNCTIONS = "../../../migrations/current/schema.sql";
/** The SET clause of every completion. */
const COMPLETION = [
  "status = 'completed', owner_token = NULL, locked_until = NULL",
  "expires_at = clock_timestamp() + retention_ms * interval '1 millisecond'",
];
/** A completing branch of a statement function: the owner's fenced call of the one completion. */
const OWNER_COMPLETION = "mark_completed(p_tenant_id, p_key, p_owner_token, false,";
/** A commit that writes nothing more unless the fenced advance of the run happened. */
const ADVANCED =
  "IF NOT advance_run(p_tenant_id, p_key, p_owner_token, p_name, p_state, p_lease_ms, p_outcome, p_response_status, p_response_body) THEN RETURN false; END IF;";
/** The completion of a durable run announced on the channel `engine.wait` listens to (store/notify-channels.ts). */
const ANNOUNCE = "IF v_run.durable THEN PERFORM pg_notify('idempo_done', completion_tag(p_tenant_id, p_key)); END IF;";

export const GUARDS: readonly GuardRow[] = [
  {
    transition: "claim",
    file: FUNCTIONS,
    fn: "claim_new_key",
    patterns: [
      "WHERE r.tenant_id = p_tenant_id AND r.key = p_key; IF FOUND THEN RETURN;",
      "ON CONFLICT (tenant_id, key) DO NOTHING",
    ],
  },
  {
    transition: "claim (the call)",
    file: "store/claim.ts",
    fn: "claimNewKey",
    patterns: ['t.calls.call<ClaimRow>(db, "claim_new_key"'],
  },
  {
    transition: "reclaim",
    file: "store/claim.ts",
    fn: "rewriteExpiredRecord",
    patterns: ["AND status = 'completed' AND @{pastTombstone}", "expires_at = NULL"],
  },
  {
    transition: "takeover",
    file: FUNCTIONS,
    fn: "take_over_expired_lease",
    patterns: [
      "AND status = 'in_flight' AND locked_until <= clock_timestamp()",
      "CASE WHEN x.exhausted THEN NULL ELSE p_owner_token END",
      "CASE WHEN x.exhausted THEN attempt ELSE attempt + 1 END",
      "RETURNING status, parked_reason, run_id, attempt, recovery_point",
    ],
  },
  {
    transition: "takeover (the call)",
    file: "store/claim.ts",
    fn: "takeOverExpiredLease",
    patterns: ['t.calls.call<TakeoverRow>(db, "take_over_expired_lease"'],
  },
  {
    transition: "park (takeover past maxAttempts)",
    file: FUNCTIONS,
    fn: "take_over_expired_lease",
    patterns: [
      "CASE WHEN x.exhausted THEN 'parked' ELSE 'in_flight' END",
      "attempt - attempt_floor >= p_max_attempts AS exhausted",
    ],
  },
  {
    transition: "park (a value that cannot be stored)",
    file: "store/transitions.ts",
    fn: "parkOwnRun",
    patterns: [FENCE, "SET status = 'parked'"],
  },
  {
    transition: "give up (attempt bound)",
    file: "store/transitions.ts",
    fn: "giveUpOwnLease",
    patterns: [FENCE, "SET owner_token = NULL"],
  },
  {
    transition: "cancel",
    file: "store/transitions.ts",
    fn: "cancelRun",
    patterns: ['markCompleted(t, k.tenantId, k.key, "operator", response)'],
  },
  {
    transition: "unpark",
    file: "store/transitions.ts",
    fn: "unparkRun",
    patterns: ["SET status = 'in_flight'", "attempt_floor = attempt", "AND status = 'parked'"],
  },
  {
    transition: "retryFrom",
    file: "store/transitions.ts",
    fn: "rewindRun",
    patterns: [
      "owner_token = NULL",
      "AND (status IN ('parked', 'suspended') OR (status = 'in_flight' AND locked_until <= clock_timestamp()))",
    ],
  },
  {
    transition: "forget",
    file: "store/transitions.ts",
    fn: "deleteRun",
    patterns: ["NOT (status = 'in_flight' AND locked_until > clock_timestamp())"],
  },
  {
    transition: "advance (phase commit, step result)",
    file: FUNCTIONS,
    fn: "advance_run",
    // Both branches (lease extended, run completed) carry the fence; a run
    // under a concurrency limit is fenced by its slot too (0022), in the
    // completing branch by mark_completed itself (0024, 0025: its own row below).
    patterns: [
      `AND ${SQL_FENCE} AND (concurrency_key IS NULL OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until)); ELSE PERFORM 1 FROM mark_completed(`,
      `${OWNER_COMPLETION} p_outcome, p_response_status, p_response_body, p_name, p_state, false); END IF`,
      "recovery_point = p_name",
      "RETURN FOUND",
    ],
  },
  { transition: "phase commit", file: FUNCTIONS, fn: "commit_phase", patterns: [ADVANCED] },
  { transition: "phase commit (the call)", file: "store/progress.ts", fn: "commitPhase", patterns: ['"commit_phase"'] },
  { transition: "step started", file: FUNCTIONS, fn: "record_step_started", patterns: [SQL_FENCE, "FROM owner"] },
  {
    transition: "step started (the call)",
    file: "store/progress.ts",
    fn: "recordStepStarted",
    patterns: ['"record_step_started"'],
  },
  { transition: "step result", file: FUNCTIONS, fn: "record_step_result", patterns: [ADVANCED] },
  {
    transition: "step result (the call)",
    file: "store/progress.ts",
    fn: "recordStepResult",
    patterns: ['"record_step_result"'],
  },
  {
    transition: "completion",
    file: FUNCTIONS,
    fn: "mark_completed",
    // The owner's completion is fenced; only an operator's cancel completes a run it does not own.
    patterns: [
      `ELSE ${SQL_FENCE} END`,
      "CASE WHEN p_cancel THEN status IN ('in_flight', 'parked', 'suspended')",
      "IF NOT FOUND THEN RETURN; END IF;",
      ...COMPLETION,
      ANNOUNCE,
    ],
  },
  {
    transition: "completion without a recovery point",
    file: FUNCTIONS,
    fn: "complete_run",
    patterns: [`PERFORM 1 FROM ${OWNER_COMPLETION}`, "RETURN FOUND"],
  },
  { transition: "completion (the call)", file: "store/progress.ts", fn: "completeRun", patterns: ['"complete_run"'] },
  { transition: "renewal", file: FUNCTIONS, fn: "renew_lease", patterns: [SQL_FENCE] },
  { transition: "renewal (the call)", file: "store/progress.ts", fn: "renewLease", patterns: ['"renew_lease"'] },
  {
    transition: "sweep",
    file: "store/maintenance.ts",
    fn: "sweepBatch",
    patterns: [
      "WHERE status = 'completed' AND expires_at <= now()",
      "FOR UPDATE SKIP LOCKED",
      "AND r.status = 'completed' AND r.expires_at <= clock_timestamp()",
    ],
  },
  {
    transition: "stale-run selection",
    file: "store/maintenance.ts",
    fn: "selectStaleRuns",
    patterns: ["WHERE status = 'in_flight' AND locked_until <= now()"],
  },
  {
    transition: "enqueue",
    file: "store/enqueue.ts",
    fn: "enqueueRun",
    patterns: ["ON CONFLICT (tenant_id, key) DO NOTHING", "'suspended', NULL, NULL, 0"],
  },
  {
    transition: "take a due suspended run",
    file: "store/due-runs.ts",
    fn: "takeDueRun",
    patterns: [
      "AND status = 'suspended' AND wake_at <= clock_timestamp()",
      "FOR UPDATE SKIP LOCKED",
      "attempt = GREATEST(r.attempt, 1)",
    ],
  },
  {
    transition: "due-run selection",
    file: "store/due-runs.ts",
    fn: "selectDueRuns",
    patterns: ["WHERE status = 'suspended' AND wake_at <= now()"],
  },
  {
    transition: "suspend (sleep)",
    file: "store/suspension.ts",
    fn: "suspendForSleep",
    patterns: [FENCE, "SET status = 'suspended', owner_token = NULL, locked_until = NULL"],
  },
  {
    transition: "wait: lock the run first",
    file: "store/suspension.ts",
    fn: "lockOwnRun",
    patterns: [FENCE, "FOR UPDATE"],
  },
  {
    transition: "suspend (wait for a signal)",
    file: "store/suspension.ts",
    fn: "checkSignalOrSuspend",
    patterns: [FENCE, "AND NOT EXISTS (SELECT 1 FROM sig)"],
  },
  {
    transition: "wait result",
    file: "store/suspension.ts",
    fn: "advancePastWait",
    patterns: ['@{advancePastWaitedItem(t, own, "wait", adv)}'],
  },
  { transition: "wait result (the move)", file: "store/progress.ts", fn: "advancePastWaitedItem", patterns: [FENCE] },
  {
    transition: "signal: lock the run first",
    file: "store/signals.ts",
    fn: "lockRunForSignal",
    patterns: ["FOR UPDATE"],
  },
  {
    transition: "signal: wake a run suspended on it",
    file: "store/signals.ts",
    fn: "deliverSignal",
    patterns: [
      "AND status = 'suspended' AND wait_kind = 'signal' AND wait_name = @{d.name}",
      "WHERE @{d.mayStore}::boolean AND NOT EXISTS (SELECT 1 FROM existing)",
    ],
  },
  {
    transition: "release",
    file: "store/transitions.ts",
    fn: "releaseLease",
    patterns: [
      "SET owner_token = NULL, locked_until = LEAST(locked_until, clock_timestamp())",
      "AND status = 'in_flight'",
    ],
  },
  {
    transition: "resume after the recovery point",
    file: "runtime/execution/executor.ts",
    fn: "resumeIndex",
    patterns: ["return idx + 1;"],
  },
  {
    transition: "derived key (step)",
    file: "runtime/execution/run-step.ts",
    fn: "runStep",
    patterns: ["deriveStepKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name)"],
  },
  {
    transition: "derived key (function)",
    file: "keys/derived-key.ts",
    fn: "deriveStepKey",
    patterns: ['hash("sha256", JSON.stringify([tenantId, key, workflow, step]), "base64url")'],
  },
  {
    transition: "schedule: lock a due row (the tick's claim)",
    file: "store/schedules.ts",
    fn: "lockDueSchedule",
    patterns: ["WHERE name = @{name} AND NOT paused AND next_tick_at <= now() FOR UPDATE SKIP LOCKED"],
  },
  {
    transition: "schedule: the runs and the row's move in one transaction",
    file: "runtime/schedules/fire-ticks.ts",
    fn: "fireSchedule",
    patterns: [
      "return engineTransaction(ctx.layer, async (tx) => {",
      "const row = await lockDueSchedule(tx, ctx.tables, name);",
      "key: tickKey(name, at)",
      "await startRun(ctx, tx, row, how.workflow, tick, input);",
      "await recordFiring(tx, ctx.tables, name, { nextTickAt: plan.next, lastTickAt, error });",
    ],
  },
  {
    transition: "schedule: a tick's run, enqueued in the firing transaction",
    file: "runtime/schedules/fire-ticks.ts",
    fn: "startRun",
    patterns: ["await enqueueOn(ctx, tx, workflow, { tenantId: row.tenant_id, key: tick.key, input });"],
  },
  {
    transition: "schedule: the tick's key",
    file: "runtime/schedules/schedule-options.ts",
    fn: "tickKey",
    patterns: ["return `schedule:@{name}:@{at.toISOString()}`;"],
  },
  {
    transition: "schedule: the row's move",
    file: "store/schedules.ts",
    fn: "recordFiring",
    patterns: ["next_tick_at = @{f.nextTickAt}::timestamptz", "WHERE name = @{name}"],
  },
  {
    transition: "schedule: a redefinition (the first tick after the now() read before)",
    file: "runtime/schedules/schedule-service.ts",
    fn: "scheduleVerbs",
    patterns: ["const now = await databaseNow(db); const next = s.rule.nextRun(now);"],
  },
  {
    transition: "schedule: a redefinition (the upsert)",
    file: "store/schedules.ts",
    fn: "upsertSchedule",
    patterns: [
      "next_tick_at = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone THEN s.next_tick_at ELSE excluded.next_tick_at END",
    ],
  },
  {
    transition: "slot: held while the run is in flight under a live lease (HOLDER_LIVE)",
    file: FUNCTIONS,
    fn: "slot_holder_live",
    patterns: ["AND status = 'in_flight' AND locked_until > clock_timestamp()"],
  },
  {
    transition: "slot: the take (lock SKIP LOCKED, then the holder read again)",
    file: FUNCTIONS,
    fn: "acquire_concurrency_slot",
    patterns: [
      "PERFORM 1 FROM concurrency_slots WHERE limit_key = p_limit_key AND slot = v_slot FOR UPDATE SKIP LOCKED; CONTINUE WHEN NOT FOUND;",
      "WHERE s.limit_key = p_limit_key AND s.slot = v_slot AND NOT slot_holder_live(s.tenant_id, s.key, s.owner_token);",
    ],
  },
  {
    transition: "slot: the holder's renewal, only while the slot is its own",
    file: FUNCTIONS,
    fn: "renew_slot_lease",
    patterns: [
      "AND owner_token = p_owner_token FOR KEY SHARE; IF NOT FOUND THEN RETURN false; END IF;",
      "RETURN renew_lease(p_tenant_id, p_key, p_owner_token, p_lease_ms);",
    ],
  },
  {
    // The model's slot commit (0022) stands for every write that re-arms the lease or completes (0024).
    transition: "slot: a branch's record, only while the slot is its own",
    file: FUNCTIONS,
    fn: "record_branch_result",
    patterns: [
      `AND ${SQL_FENCE} AND (concurrency_key IS NULL OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until)); IF NOT FOUND THEN RETURN false;`,
    ],
  },
  {
    transition: "slot: an owner's completion, only while the slot is its own",
    file: FUNCTIONS,
    fn: "mark_completed",
    patterns: [
      "AND (p_cancel OR concurrency_key IS NULL OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until))",
    ],
  },
  {
    transition: "slot: the move past a waited item, only while the slot is its own",
    file: "store/progress.ts",
    fn: "advancePastWaitedItem",
    patterns: [`${FENCE} AND @{slotFence(t)}`],
  },
  {
    transition: "slot: the fence of the store's own writes",
    file: "store/progress.ts",
    fn: "slotFence",
    patterns: [
      "(concurrency_key IS NULL OR @{t.slotCommitAllowed}(tenant_id, key, owner_token, concurrency_key, locked_until))",
    ],
  },
  {
    transition: "slot: a run over its limit is not taken until a slot frees",
    file: "store/due-runs.ts",
    fn: "selectDueRuns",
    patterns: ["ELSE @{held}(concurrency_key, concurrency_max) < concurrency_max END"],
  },
];
