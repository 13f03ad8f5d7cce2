/**
 * The guards the model assumes, row by row: each model transition, the
 * source function it stands for, and the text that function must contain.
 * test/guard-sync.test.ts reads the sources and fails when a pattern is
 * gone, so the model cannot drift from the SQL unnoticed. To add a row,
 * name the file (relative to packages/core/src), the function, and the
 * patterns; whitespace in patterns and sources is compared collapsed, and
 * `@{x}` in a pattern stands for the query parameter `${x}` of the sql tag.
 */
export interface GuardRow {
  readonly transition: string;
  readonly file: string;
  readonly fn: string;
  readonly patterns: readonly string[];
}

/** The fence every write of a run carries. */
const FENCE = "owner_token = @{own.ownerToken} AND status = 'in_flight'";

export const GUARDS: readonly GuardRow[] = [
  {
    transition: "claim",
    file: "store/claim.ts",
    fn: "claimNewKey",
    patterns: ["ON CONFLICT (tenant_id, key) DO NOTHING"],
  },
  {
    transition: "reclaim",
    file: "store/claim.ts",
    fn: "reclaimExpiredKey",
    patterns: ["AND status = 'completed' AND expires_at <= clock_timestamp()", "expires_at = NULL"],
  },
  {
    transition: "takeover",
    file: "store/claim.ts",
    fn: "takeOverExpiredLease",
    patterns: [
      "AND status = 'in_flight' AND locked_until <= clock_timestamp()",
      "CASE WHEN x.exhausted THEN NULL ELSE @{req.ownerToken}::text END",
      "CASE WHEN x.exhausted THEN attempt ELSE attempt + 1 END",
      "RETURNING status, parked_reason, run_id, attempt, recovery_point",
    ],
  },
  {
    transition: "park (takeover past maxAttempts)",
    file: "store/claim.ts",
    fn: "takeOverExpiredLease",
    patterns: [
      "CASE WHEN x.exhausted THEN 'parked' ELSE 'in_flight' END",
      "attempt - attempt_floor >= @{req.maxAttempts}::int AS exhausted",
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
    patterns: [
      "SET status = 'completed', owner_token = NULL, locked_until = NULL",
      "AND status IN ('in_flight', 'parked', 'suspended')",
    ],
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
    transition: "phase commit",
    file: "store/progress.ts",
    fn: "commitPhase",
    patterns: [FENCE, "recovery_point = @{adv.name}"],
  },
  { transition: "step started", file: "store/progress.ts", fn: "recordStepStarted", patterns: [FENCE, "FROM owner"] },
  { transition: "step result", file: "store/progress.ts", fn: "recordStepResult", patterns: [FENCE] },
  { transition: "completion", file: "store/progress.ts", fn: "completeRun", patterns: [FENCE] },
  {
    transition: "completion (SET clause)",
    file: "store/progress.ts",
    fn: "completion",
    patterns: ["status = 'completed', owner_token = NULL, locked_until = NULL", "expires_at = clock_timestamp() +"],
  },
  { transition: "renewal", file: "store/progress.ts", fn: "renewLease", patterns: [FENCE] },
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
  { transition: "wait result", file: "store/suspension.ts", fn: "advancePastWait", patterns: [FENCE] },
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
    file: "runtime/executor.ts",
    fn: "resumeIndex",
    patterns: ["return idx + 1;"],
  },
  {
    transition: "derived key (step)",
    file: "runtime/executor.ts",
    fn: "runStep",
    patterns: ["deriveStepKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name)"],
  },
  {
    transition: "derived key (function)",
    file: "keys/derived-key.ts",
    fn: "deriveStepKey",
    patterns: [".update(JSON.stringify([tenantId, key, workflow, step]))"],
  },
];

const collapse = (text: string) => text.replace(/\s+/g, " ");
const pattern = (p: string) => collapse(p.replaceAll("@{", "$" + "{"));

/**
 * The text of a top-level function in a source file: from its `function`
 * keyword to the first line that is a lone closing brace. Null when absent.
 */
function functionText(source: string, fn: string): string | null {
  const start = new RegExp(`^(?:export )?(?:async )?function ${fn}\\b`, "m").exec(source);
  if (!start) return null;
  const end = source.indexOf("\n}\n", start.index);
  return source.slice(start.index, end < 0 ? undefined : end + 2);
}

/** The patterns of a row that the function's text lacks (all of them when the function is gone). */
export function missingPatterns(source: string, row: GuardRow): string[] {
  const text = functionText(source, row.fn);
  if (text === null) return [...row.patterns];
  const body = collapse(text);
  return row.patterns.filter((p) => !body.includes(pattern(p)));
}
