/*
 * idempo's claim / lease / takeover / fencing / recovery-point protocol,
 * for one key, as spin checks it; and, in the SCHEDULE scenario, the
 * firing of one durable schedule's ticks by two workers; in CHILD, a
 * parent's start of child runs; in SLOTS, concurrency slots as leases.
 *
 * The database is the global record below; every procedure named after a
 * store function is one SQL statement and runs as one indivisible step
 * (d_step), which is what PostgreSQL's row lock gives a single UPDATE,
 * INSERT or DELETE on the key's row. Everything between two statements can
 * interleave with everything else: other attempts, the operator, the
 * sweeper, and the clock, which may expire the lease (or the retention) at
 * any moment. Any attempt may crash before any statement while the crash
 * budget lasts; any attempt may also simply stop being scheduled for as
 * long as spin likes, which is how a paused zombie looks to the protocol.
 *
 * The workflow is  phase P1, step S, phase P2 (the last item, whose commit
 * stores the response). Recovery points: 0 none, 1 after P1, 2 after S,
 * 3 after P2.
 *
 * Each property is a ghost bit that turns 0 just before an assertion on it,
 * so spin names the property that failed ("assertion violated one_owner").
 * Variants remove one guard each, and spin must then find a violation
 * (packages/model/src/checks.ts lists the property each must break):
 *   V_COMMIT_NO_TOKEN     phase commit without owner_token = $token
 *   V_TAKEOVER_NO_LEASE   takeover without locked_until <= clock_timestamp()
 *   V_TAKEOVER_NO_STATUS  takeover without status = 'in_flight'
 *   V_SWEEP_NO_RECHECK    the sweep's DELETE without its status/expiry re-check
 *   V_RESUME_FROM_START   a takeover resuming from the start, not the recovery point
 *   V_CANCEL_COMPLETED    cancel accepting a completed run
 *   V_KEY_PER_ATTEMPT     a step's derived key mixing in the attempt number
 *   V_CLAIM_UPSERT        the claim as an upsert instead of ON CONFLICT DO NOTHING
 *   V_NO_PARK             no parking at maxAttempts (a liveness variant)
 *   V_RELEASE_KEEPS_TOKEN release moving locked_until without clearing the owner
 *   V_TICK_KEY_PER_WORKER a schedule tick's run key mixing in the worker
 *   V_TICK_APART          a schedule's move past its ticks committed apart from their runs
 *   V_CHILD_APART         a parent's children created in a transaction after its item's start
 *   V_CHILD_KEY_PER_ATTEMPT a child's key mixing in the parent's attempt number
 *   V_SWEEP_WAITING_CHILD the sweep deleting a child whose parent has not completed
 *   V_SLOT_NO_LOCK        a concurrency slot taken by a read, then a write, without its lock
 *   V_SLOT_NOT_LEASE      a slot held while its run is in flight, lease or not (liveness)
 *   V_SLOT_COMMIT_UNFENCED a holder's phase commit re-arming its lease without its slot's check
 * Open findings (src/checks.ts FINDINGS) are switches that add what the
 * engine does as written where spin finds it wrong; none is open now.
 *
 * Scenario switches (RACE, RETENTION, OPERATOR, SCHEDULE, CHILD, SLOTS)
 * and sizes (CRASHES, MAX_ATTEMPTS, TICKS) are at the end, with the
 * processes; LIVENESS adds the LTL property for the acceptance-cycle
 * search. SCHEDULE, CHILD and SLOTS are models of their own beside the
 * key's: one durable schedule and the workers that fire its ticks (see "a
 * durable schedule" below), a parent starting child runs (child.pml),
 * and concurrency slots (slots.pml), both included here.
 */

#ifndef MAX_ATTEMPTS
#define MAX_ATTEMPTS 2 /* workflow option maxAttempts */
#endif
#ifndef CRASHES
#define CRASHES 1 /* crash budget shared by every attempt */
#endif

/* status */
#define ABSENT 0
#define IN_FLIGHT 1
#define COMPLETED 2
#define PARKED 3
/* locked_until: NULL, in the future, in the past (DB clock) */
#define L_NULL 0
#define L_LIVE 1
#define L_EXPIRED 2
/* expires_at: NULL, in the future, in the past */
#define E_NULL 0
#define E_LATER 1
#define E_PASSED 2
/* outcome of the stored response */
#define SUCCEEDED 1
#define FAILED 2
#define CANCELED 3
/* what a claim or takeover gave its caller */
#define R_NONE 0
#define R_CLAIMED 1
#define R_EXISTING 2
#define R_TAKEN 3
#define R_PARKED 4
#define R_RECLAIM 5
#define R_REPLAY 6
#define R_REFUSED 7
#define R_TAKEOVER 8

/* ---- the key's row in idempo.runs -------------------------------------- */
byte status = ABSENT;
byte owner;          /* owner_token; 0 is NULL. Tokens are fresh per claim: see mint() */
byte lease = L_NULL; /* locked_until */
byte expiry = E_NULL; /* expires_at */
byte attempt;
byte rp;             /* recovery_point */
byte resp;           /* outcome, response_status, response_body */
byte firstKey;       /* run_history.derived_key of the first step start; 0 none */

byte crashes = CRASHES;
/* scratch for the claim's read-only check; not part of the state */
hidden byte sStatus, sLease, sExpiry, sOwner, sAttempt, sRp, sResp;

/* ---- ghosts: what the properties remember ------------------------------ */
byte cur;            /* the newest owner token no one has revoked; 0 none */
bit p1done, p2done;  /* committed in this run (per phase) */
byte doneResp;       /* the response as first completed in this run */
bit single_writer = 1, one_owner = 1, phase_once = 1, response_stable = 1,
    derived_key_stable = 1, intent_kept = 1, terminal_never_taken = 1,
    refusal_read_only = 1;

#define REQUIRE(prop, cond) if :: !(cond) -> prop = 0 :: else -> skip fi; assert(prop)

/* A fenced write by `tok` committed: only the newest unrevoked token may. */
#define WROTE(tok) REQUIRE(single_writer, (tok) == cur)

/* Once a run is completed its response is fixed until a new run starts. */
#define CHECK_RESPONSE \
  if \
  :: status == COMPLETED && doneResp == 0 -> doneResp = resp \
  :: status == COMPLETED && doneResp != 0 -> REQUIRE(response_stable, resp == doneResp) \
  :: else -> skip \
  fi

#define NEW_RUN() p1done = 0; p2done = 0; doneResp = 0

/* SET clause of a completion (progress.ts completion()): drop owner and lease, start retention. */
#define COMPLETE(outcome, tok) \
  status = COMPLETED; owner = 0; lease = L_NULL; expiry = E_LATER; \
  resp = (outcome); cur = 0

/* The fence of every write a run makes: owner_token = $token AND status = 'in_flight'. */
#define FENCE(tok) (owner == (tok) && status == IN_FLIGHT)
#ifdef V_COMMIT_NO_TOKEN
#define COMMIT_FENCE(tok) (status == IN_FLIGHT)
#else
#define COMMIT_FENCE(tok) FENCE(tok)
#endif

#ifdef V_TAKEOVER_NO_LEASE
#define TAKEOVER_GUARD (status == IN_FLIGHT)
#elif defined(V_TAKEOVER_NO_STATUS)
#define TAKEOVER_GUARD (lease == L_EXPIRED)
#else
#define TAKEOVER_GUARD (status == IN_FLIGHT && lease == L_EXPIRED)
#endif

#ifdef V_NO_PARK
#define PARK_GUARD false
#else
#define PARK_GUARD (attempt >= MAX_ATTEMPTS)
#endif

#ifdef V_KEY_PER_ATTEMPT
#define DERIVE(att) (1 + (att))
#else
#define DERIVE(att) 1 /* deriveStepKey(tenant, key, workflow, step): no attempt, no token */
#endif

/* ---- statements ---------------------------------------------------------- */

/* claim: claimNewKey (store/claim.ts). INSERT ... ON CONFLICT DO NOTHING, then
 * read the row it collided with. A caller refused on what it read (409 for a
 * live lease, RunParkedError for a parked run) must have changed nothing. */
inline claim(tok, r) {
  d_step {
    if
    :: status == ABSENT ->
       status = IN_FLIGHT; owner = tok; lease = L_LIVE; expiry = E_NULL; attempt = 1; rp = 0;
       resp = 0; cur = tok; NEW_RUN(); r = R_CLAIMED
    :: else ->
       sStatus = status; sLease = lease; sExpiry = expiry;
       sOwner = owner; sAttempt = attempt; sRp = rp; sResp = resp;
#ifdef V_CLAIM_UPSERT
       /* ON CONFLICT DO UPDATE SET owner_token = EXCLUDED.owner_token, locked_until = EXCLUDED.locked_until */
       if :: status == IN_FLIGHT -> owner = tok; lease = L_LIVE; cur = tok :: else -> skip fi;
#endif
       /* what claimAndRun (engine.ts) does with the row it read */
       if
       :: sStatus == COMPLETED && sExpiry == E_PASSED -> r = R_RECLAIM
       :: sStatus == COMPLETED && sExpiry != E_PASSED -> r = R_REPLAY
       :: sStatus == PARKED -> r = R_PARKED /* RunParkedError */
       :: sStatus == IN_FLIGHT && sLease == L_LIVE -> r = R_REFUSED /* 409, retryAfterMs */
       :: sStatus == IN_FLIGHT && sLease != L_LIVE -> r = R_TAKEOVER
       fi;
       if
       :: r == R_REFUSED || r == R_PARKED ->
          REQUIRE(refusal_read_only, status == sStatus && lease == sLease && expiry == sExpiry &&
                  owner == sOwner && attempt == sAttempt && rp == sRp && resp == sResp)
       :: else -> skip
       fi
    fi;
    CHECK_RESPONSE
  }
}

/* reclaim: reclaimExpiredKey (store/claim.ts). A completed record past
 * retention counts as absent: a new run on the same key. */
inline reclaim(tok, ok) {
  d_step {
    if
    :: status == COMPLETED && expiry == E_PASSED ->
       status = IN_FLIGHT; owner = tok; lease = L_LIVE; expiry = E_NULL; attempt = 1; rp = 0;
       resp = 0; cur = tok; NEW_RUN(); ok = true
    :: else -> ok = false
    fi
  }
}

/* takeover: takeOverExpiredLease (store/claim.ts). New owner token, fresh
 * lease, attempt + 1, hand back the recovery point.
 * park: the same statement when it would start attempt maxAttempts + 1
 * (SPEC second round; not in takeOverExpiredLease on this branch yet). */
inline takeover(tok, r) {
  d_step {
    if
    :: TAKEOVER_GUARD ->
       REQUIRE(terminal_never_taken, status == IN_FLIGHT);
       REQUIRE(one_owner, !(owner != 0 && lease == L_LIVE));
       if
       :: PARK_GUARD ->
          status = PARKED; owner = 0; cur = 0; r = R_PARKED
       :: else ->
          owner = tok; lease = L_LIVE; cur = tok; r = R_TAKEN;
          if :: attempt <= MAX_ATTEMPTS -> attempt++ :: else -> skip fi; /* saturates in V_NO_PARK */
#ifdef V_KEY_PER_ATTEMPT
          myAtt = attempt;
#endif
#ifdef V_RESUME_FROM_START
          i = 0
#else
          i = rp
#endif
       fi
    :: else -> r = R_NONE
    fi;
    CHECK_RESPONSE
  }
}

/* phase commit: commitPhase (store/progress.ts). Recovery point, state and
 * the phase's own writes commit together; the last phase also completes. */
inline commitPhase(tok, item, ok) {
  d_step {
    if
    :: COMMIT_FENCE(tok) ->
       WROTE(tok);
       if
       :: item == 1 -> REQUIRE(phase_once, p1done == 0); p1done = 1
       :: else -> REQUIRE(phase_once, p2done == 0); p2done = 1
       fi;
       rp = item;
       if :: item == 3 -> COMPLETE(SUCCEEDED, tok) :: else -> lease = L_LIVE fi;
       ok = true
    :: else -> ok = false
    fi;
    CHECK_RESPONSE
  }
}

/* step started: recordStepStarted (store/progress.ts), with the derived key. */
inline stepStarted(tok, key, ok) {
  d_step {
    if
    :: FENCE(tok) ->
       WROTE(tok);
       if
       :: firstKey == 0 -> firstKey = key
       :: else -> REQUIRE(derived_key_stable, key == firstKey)
       fi;
       ok = true
    :: else -> ok = false
    fi
  }
}

/* step result: recordStepResult (store/progress.ts). */
inline stepResult(tok, ok) {
  d_step {
    if
    :: FENCE(tok) -> WROTE(tok); rp = 2; lease = L_LIVE; ok = true
    :: else -> ok = false
    fi
  }
}

/* completion: completeRun (store/progress.ts), here ctx.fail in P2. */
inline completeRun(tok, ok) {
  d_step {
    if
    :: FENCE(tok) -> WROTE(tok); COMPLETE(FAILED, tok); ok = true
    :: else -> ok = false
    fi;
    CHECK_RESPONSE
  }
}

/* renewal: renewLease (store/progress.ts), the heartbeat. */
inline renewLease(tok, ok) {
  d_step {
    if
    :: FENCE(tok) -> WROTE(tok); lease = L_LIVE; ok = true
    :: else -> ok = false
    fi
  }
}

/* ---- one attempt: the executor's loop (runtime/executor.ts execute) ------ */

#define MAYBE_CRASH if :: d_step { crashes > 0; crashes-- }; goto crashed :: true -> skip fi

/* The heartbeat, at most once per attempt and during the step (the long
 * part of a run); unbounded renewals would let one attempt spin forever
 * without making progress, which no real run does. */
#define MAYBE_RENEW(tok) \
  if \
  :: !renewed -> renewed = 1; renewLease(tok, ok); if :: !ok -> goto lost :: else -> ok = 0 fi \
  :: true -> skip \
  fi

inline runAttempt(tok) {
  r = 0;
  do
  :: i == 0 -> /* phase P1 */
     MAYBE_CRASH;
     commitPhase(tok, 1, ok);
     if :: ok -> ok = 0; i = 1 :: else -> goto lost fi
  :: i == 1 -> /* step S: started, the downstream call, the result */
     MAYBE_CRASH;
     stepStarted(tok, DERIVE(myAtt), ok);
     if :: ok -> ok = 0 :: else -> goto lost fi;
     MAYBE_CRASH; /* the downstream call is made here, with the derived key */
     MAYBE_RENEW(tok);
     stepResult(tok, ok);
     if :: ok -> ok = 0; i = 2 :: else -> goto lost fi
  :: i == 2 -> /* phase P2, the last item: commit with the response, or ctx.fail */
     MAYBE_CRASH;
     if
     :: commitPhase(tok, 3, ok)
     :: completeRun(tok, ok)
     fi;
     if :: ok -> ok = 0; i = 3 :: else -> goto lost fi
  :: i == 3 -> break
  od
}

#ifdef V_KEY_PER_ATTEMPT
#define SET_ATT(n) myAtt = n
#else
#define SET_ATT(n) skip /* the attempt number matters only to the variant that mixes it in */
#endif
#define ATTEMPT_LOCALS byte r, i, myAtt; bit ok, renewed

/* Locals back to 0 once an attempt is over, so finished attempts do not
 * multiply the state space. */
#define FORGET_LOCALS skip; d_step { r = 0; i = 0; myAtt = 0; ok = 0; renewed = 0 }

/* ---- processes ------------------------------------------------------------ */

/* A client calling runOnce with the key (engine.ts claimAndRun), and calling
 * again after every 409 or lost lease until it has an answer: the stored
 * response, its own run's response, or RunParkedError. */
proctype client(byte tok) {
  ATTEMPT_LOCALS;
call:
  do
  :: MAYBE_CRASH;
     claim(tok, r);
     if
     :: r == R_CLAIMED -> SET_ATT(1); i = 0; runAttempt(tok); break
     :: r == R_RECLAIM ->
        MAYBE_CRASH;
        reclaim(tok, ok);
        if :: ok -> ok = 0; SET_ATT(1); i = 0; runAttempt(tok); break :: else -> r = 0 fi
     :: r == R_REPLAY -> break
     :: r == R_REFUSED -> r = 0 /* 409: call again */
     :: r == R_PARKED -> break /* RunParkedError */
     :: r == R_TAKEOVER ->
        MAYBE_CRASH;
        takeover(tok, r);
        if
        :: r == R_TAKEN -> runAttempt(tok); break
        :: r == R_PARKED -> break /* RunParkedError */
        :: else -> r = 0
        fi
     fi
  od;
  goto crashed;
lost: /* LeaseLostError (409): the caller calls again */
  FORGET_LOCALS;
  goto call;
crashed:
  FORGET_LOCALS
}

/* The stale-run resumer (engine.ts resumeStale, startWorker): find in-flight
 * runs with an expired lease (selectStaleRuns, store/maintenance.ts), take
 * each over with the statement a client retry uses, and run it. A crashed
 * worker is restarted. */
proctype resumer(byte tok) {
  ATTEMPT_LOCALS;
end_idle:
  atomic { status == IN_FLIGHT && lease == L_EXPIRED }; /* selectStaleRuns */
  MAYBE_CRASH;
  takeover(tok, r);
  if :: r == R_TAKEN -> runAttempt(tok) :: else -> skip fi;
lost:
crashed:
  FORGET_LOCALS;
  goto end_idle
}

/* The database clock: a live lease may run out at any moment, and in the
 * retention scenario a completed record may pass its retention. */
proctype clock() {
end_tick:
  do
  :: d_step { lease == L_LIVE -> lease = L_EXPIRED }
#ifdef RETENTION
  :: d_step { expiry == E_LATER -> expiry = E_PASSED }
#endif
  od
}

/* An operator running one verb at any moment (SPEC, second round). */
proctype operator() {
  byte target;
  if
  :: d_step { /* cancel: engine.cancel (not on this branch yet) */
       if
#ifdef V_CANCEL_COMPLETED
       :: status != ABSENT ->
#else
       :: status == IN_FLIGHT || status == PARKED ->
#endif
          COMPLETE(CANCELED, 0)
       :: else -> skip /* RunStateError: nothing written */
       fi;
       CHECK_RESPONSE
     }
  :: d_step { /* release: expireLease (store/operations.ts); SPEC: ends the owner's lease for good */
       if
       :: status == IN_FLIGHT ->
#ifndef V_RELEASE_KEEPS_TOKEN
          owner = 0;
#endif
          lease = L_EXPIRED; cur = 0
       :: else -> skip
       fi
     }
  :: d_step { /* unpark: engine.unpark (not on this branch yet) */
       if
       :: status == PARKED -> status = IN_FLIGHT; attempt = 0; lease = L_EXPIRED
       :: else -> skip
       fi
     }
  :: if :: target = 0 :: target = 1 fi; /* retryFrom P1, or retryFrom S */
     d_step { /* retryFrom: engine.retryFrom (not on this branch yet) */
       if
       :: (status == IN_FLIGHT && lease == L_EXPIRED) || status == PARKED ->
          if :: status == PARKED -> status = IN_FLIGHT; attempt = 0 :: else -> skip fi;
          /* clearing the owner token fences out a zombie of the old attempt */
          rp = target; lease = L_EXPIRED; owner = 0; cur = 0;
          /* the operator asked for these items to run again */
          if :: target == 0 -> p1done = 0 :: else -> skip fi;
          p2done = 0
       :: else -> skip
       fi
     }
  :: if :: target = 0 :: target = 1 fi; /* forget, or forget --force */
     d_step { /* forget: deleteRecord (store/admin.ts); SPEC: refuses a live lease unless forced */
       if
       :: status != ABSENT && (target == 1 || !(status == IN_FLIGHT && lease == L_LIVE)) ->
          status = ABSENT; owner = 0; lease = L_NULL; expiry = E_NULL; attempt = 0; rp = 0;
          resp = 0; cur = 0; NEW_RUN()
       :: else -> skip
       fi
     }
  :: skip
  fi
}

/* The sweeper: sweepBatch (store/maintenance.ts). The candidate scan and the
 * DELETE are one statement, and its FOR UPDATE lock alone would keep a
 * reclaim out between them; the model does not credit that lock, and splits
 * them, so the DELETE's own re-check of status and expiry is what it checks. */
proctype sweeper() {
  if
  :: atomic { status == COMPLETED && expiry == E_PASSED } ->
     d_step {
#ifdef V_SWEEP_NO_RECHECK
       if :: status != ABSENT ->
#else
       if :: status == COMPLETED && expiry == E_PASSED ->
#endif
          REQUIRE(intent_kept, status == COMPLETED);
          status = ABSENT; owner = 0; lease = L_NULL; expiry = E_NULL; attempt = 0; rp = 0;
          resp = 0; cur = 0; NEW_RUN()
       :: else -> skip
       fi
     }
  :: skip
  fi
}

#ifdef SCHEDULE
/* ---- a durable schedule (runtime/schedules/fire-ticks.ts) -----------------
 *
 * One row of idempo.schedules and the runs its ticks start. The clock lets
 * TICKS tick instants come, one after the other; two workers fire the row
 * (each round: a due read without locks, then a transaction that locks the
 * row with SKIP LOCKED and re-checks that it is due, enqueues the run of each
 * due tick and moves the row past them, then commits); a process starting
 * with a changed definition of the schedule (same instants, say the zone
 * spelt another way) rewrites the row once, with the first tick after the
 * now() it read before. Every tick is fired as due (catchUp 'all', or every
 * tick on time): which missed ticks 'latest' and 'none' drop is tick
 * arithmetic, tested in ticks.test.ts, not a race. A worker may crash
 * before any statement (its transaction rolls back, its lock goes); the
 * tick's run, once created, is the key's protocol above. */
#ifndef TICKS
#define TICKS 3
#endif

byte due;            /* ticks whose instant has come (DB clock): ticks 0 .. due-1 */
byte nextTick;       /* next_tick_at: the first tick not fired; TICKS when none is left */
byte lastTick = TICKS; /* last_tick_at: the last tick a round fired; TICKS is NULL */
byte rowLock;        /* the worker holding the row (FOR UPDATE), 0 none */
byte runKeys;        /* idempo.runs: bit k set when a run exists under key k */
bit redefined;       /* the changed definition has been written */
/* ghosts */
byte runsOfTick[TICKS];
bit droppedTick[TICKS]; /* due under the old definition, unfired when the new one replaced it: dropped by design */
bit tick_one_run = 1, last_tick_true = 1;

/* The run key of tick t fired by worker w, as a bit position: tickKey(name, at)
 * is the schedule's name and the tick's time, nothing of the worker. */
#ifdef V_TICK_KEY_PER_WORKER
#define TICK_KEY(t, w) (2 * (t) + (w) - 1)
#else
#define TICK_KEY(t, w) (2 * (t))
#endif

/* The round's enqueues (enqueueRun: INSERT ... ON CONFLICT DO NOTHING), as
 * they become visible at its commit. A key that exists already is the same
 * request: a no-op, no second run. */
inline insertRuns(pending, k) {
  k = 0;
  do
  :: k < 2 * TICKS ->
     if
     :: ((pending >> k) & 1) && !((runKeys >> k) & 1) ->
        runKeys = runKeys | (1 << k);
        runsOfTick[k / 2]++;
        REQUIRE(tick_one_run, runsOfTick[k / 2] == 1)
     :: else -> skip
     fi;
     k++
  :: else -> break
  od;
  pending = 0
}

/* The clock: the tick instants come, in order. */
proctype ticker() {
  do
  :: d_step { due < TICKS -> due++ }
  :: else -> break
  od
}

/* A worker's firing loop (fireDueSchedules, fireSchedule). */
proctype firer(byte w) {
  byte t, upTo, pending, k;
  bit held;
round:
  do
  :: atomic { nextTick < due } -> /* selectDueSchedules: read without locks */
     MAYBE_CRASH;
     d_step { /* BEGIN; lockDueSchedule: next_tick_at <= now() FOR UPDATE SKIP LOCKED */
       if
       :: rowLock == 0 && nextTick < due -> rowLock = w; held = 1; t = nextTick; upTo = due
       :: else -> skip /* locked by the other worker, or no longer due: skipped */
       fi
     };
     do
     :: t < upTo -> /* startRun: enqueue(tx, ...) of tick t, under its key */
        MAYBE_CRASH;
        d_step { pending = pending | (1 << TICK_KEY(t, w)); t++ }
     :: else -> break
     od;
     if
     :: held ->
        MAYBE_CRASH;
#ifdef V_TICK_APART
        /* the row's move committed on its own, the runs in a later transaction */
        d_step { nextTick = upTo; lastTick = upTo - 1; rowLock = 0; held = 0 };
        MAYBE_CRASH;
        d_step { insertRuns(pending, k) }
#else
        /* recordFiring, COMMIT: the runs and the row's move together */
        d_step { insertRuns(pending, k); nextTick = upTo; lastTick = upTo - 1; rowLock = 0; held = 0 }
#endif
     :: else -> skip
     fi;
     d_step { t = 0; upTo = 0; k = 0 }
  :: nextTick == TICKS && due == TICKS && redefined -> break
  od;
  goto stopped;
crashed: /* the connection is gone: PostgreSQL rolls the transaction back and drops the lock */
  skip;
  d_step { if :: held -> rowLock = 0; held = 0 :: else -> skip fi; pending = 0; t = 0; upTo = 0; k = 0 };
  goto round;
stopped:
  skip
}

/* engine.schedule with a changed cron or zone (schedule-service.ts, then
 * upsertSchedule): databaseNow, the first tick after it, any time later the
 * upsert, which replaces next_tick_at when the cron or zone changed and
 * waits for a firing round's row lock. The ticks fired in between are put
 * back on the row and fired again, under the same keys. */
proctype redefine() {
  byte first, k;
  first = due; /* the first tick after now(): the next instant to come (TICKS: none left) */
  d_step {
    rowLock == 0;
    k = nextTick;
    do :: k < first -> droppedTick[k] = 1; k++ :: else -> break od;
    nextTick = first; redefined = 1; k = 0
  };
  first = 0
}

/* Once everything has stopped: every tick made exactly one run, but those
 * the new definition dropped, which made none; and last_tick_at names the
 * latest tick that made one (NULL when none did). */
#define CHECK_TICKS \
  d_step { \
    t = 0; latest = TICKS; \
    do \
    :: t < TICKS -> \
       REQUIRE(tick_one_run, runsOfTick[t] == (1 - droppedTick[t])); \
       if :: runsOfTick[t] > 0 -> latest = t :: else -> skip fi; \
       t++ \
    :: else -> break \
    od; \
    REQUIRE(last_tick_true, lastTick == latest) \
  }
#endif

#include "child.pml"
#include "slots.pml"

/* Who runs, by scenario (one model, six configurations, so that each
 * state space stays small enough to search exhaustively):
 *   RACE (default)  two clients calling runOnce with the same key and
 *                   payload, and a resumer
 *   RETENTION       the same, plus the sweeper, and a completed record's
 *                   retention can pass (the key is then reclaimed)
 *   OPERATOR        one client, a resumer, and an operator running one
 *                   verb at any moment
 *   SCHEDULE        no key's run: the clock's ticks, two workers firing
 *                   the schedule, one redefinition of it; once all have
 *                   stopped, init checks every tick's runs
 *   CHILD           a parent starting two children: two workers on the
 *                   parent, the child worker, the sweeper
 *   SLOTS           three workers, each with its run, sharing two
 *                   concurrency slots of one key */
init {
#if defined(CHILD)
  atomic {
    alive[1] = 1;
    run parentWorker(1);
    run parentWorker(2);
    run children();
    run parentClock()
  }
#elif defined(SLOTS)
  atomic {
    rSt[1] = R_RUN; rLease[1] = L_LIVE;
    rSt[2] = R_RUN; rLease[2] = L_LIVE;
    rSt[3] = R_RUN; rLease[3] = L_LIVE;
    run slotWorker(1);
    run slotWorker(2);
    run slotWorker(3);
    run slotClock()
  }
#elif defined(SCHEDULE)
  byte t, latest;
  atomic {
    run ticker();
    run firer(1);
    run firer(2);
    run redefine()
  };
  _nr_pr == 1;
  CHECK_TICKS
#else
  atomic {
    run clock();
    run client(1);
#ifdef OPERATOR
    run operator();
#else
    run client(2);
#endif
#ifdef RETENTION
    run sweeper();
#endif
    run resumer(3)
  }
#endif
}

#if defined(LIVENESS) && defined(CHILD)
/* The parent completes: once crashes stop, its children run, the last one
 * wakes it, and a worker takes it and reads them. */
ltl parent_done { <> (pSt == P_DONE) }
#elif defined(LIVENESS) && defined(SLOTS)
/* A waiting worker gets a slot: every worker completes its run or is dead;
 * no one waits for ever behind a dead holder. */
ltl slots_freed { <> (settled == SLOT_WORKERS) }
#elif defined(LIVENESS) && defined(SCHEDULE)
/* The schedule gets through its ticks: once crashes stop, the row reaches
 * the end of its ticks and stays there. */
ltl ticks_fired { <>[] (nextTick == TICKS) }
#elif defined(LIVENESS)
/* No intent is lost: once crashes stop (the budget is finite), no run stays
 * in flight for ever; every run ends completed (or canceled) or parked, or
 * an operator forgot it. "Infinitely often not in flight" and not "finally
 * never in flight": a key reused after its retention runs again, and a
 * client may keep reusing it. */
ltl ends { []<> (status != IN_FLIGHT) }
#endif
