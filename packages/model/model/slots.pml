/* Part of idempo.pml, which includes it (spin -DSLOTS idempo.pml); not a model on its own. */

#ifdef SLOTS
/* ---- concurrency slots (.concurrency({ key, max }); store/concurrency-slots.ts)
 *
 * SLOT_WORKERS workers, each running its own run of a workflow with one
 * concurrency key and SLOT_MAX slots. A slot row names the attempt that
 * took it last; it is held while that run is in flight under a lease that
 * has not ended (slot_holder_live): the slot is the lease. A worker that
 * has its run takes a slot (acquire_concurrency_slot: each slot that looks
 * free in the snapshot is locked FOR UPDATE SKIP LOCKED, its holder read
 * again, and it is taken only if still free; the transaction commits right
 * after, which drops the locks); with every slot held the same statement
 * steps the run aside (suspended and due, no owner), and the worker takes
 * it again once the due-run query sees a slot free
 * (concurrency_slots_held < max). A holder works, renews once
 * (renew_slot_lease: the slot row locked FOR KEY SHARE, then the lease
 * renewed only while the slot names it), may commit a phase (advance_run:
 * the slot row locked FOR KEY SHARE and the lease re-armed only while the
 * slot is its own, or no slot names it and its lease is live) and
 * completes. A worker may crash
 * before any statement and stays dead: its lease ends at any moment after.
 * The lease of a live worker (a paused one) may also end, within a finite
 * budget. */
#define SLOT_WORKERS 3 /* fixed: HELD_COUNT and slotClock spell them out */
#define SLOT_MAX 2
#ifndef SLOW_LEASES
#define SLOW_LEASES 1 /* lease ends of a live (paused) holder */
#endif
#define R_RUN 1
#define R_SUSP 2
#define R_DONE 3

byte holder[SLOT_MAX];   /* concurrency_slots.owner_token: the worker, 0 none */
byte slotLock[SLOT_MAX]; /* FOR UPDATE of a taker, 0 none */
byte rSt[SLOT_WORKERS + 1];
byte rLease[SLOT_WORKERS + 1];
bit exec[SLOT_WORKERS + 1];  /* ghost: the attempt took a slot and runs as its holder */
bit dead[SLOT_WORKERS + 1];  /* ghost: the worker crashed */
byte slowLeases = SLOW_LEASES;
byte settled;                /* ghost: workers completed or dead */
hidden byte nLive, si;
bit at_most_max = 1, slot_one_owner = 1;

/* slot_holder_live: the run in flight under a lease that has not ended. */
#define LIVE_RUN(w) ((w) != 0 && rSt[w] == R_RUN && rLease[w] == L_LIVE)
#ifdef V_SLOT_NOT_LEASE
#define HOLDER_LIVE(w) ((w) != 0 && rSt[w] == R_RUN) /* no lease: a dead owner holds for ever */
#else
#define HOLDER_LIVE(w) LIVE_RUN(w)
#endif
#define HELD(s) HOLDER_LIVE(holder[s])
#define HELD_COUNT (HELD(0) + HELD(1))

/* At no time more than max attempts run as holders under a live lease. */
#define CHECK_HOLDERS \
  nLive = 0; si = 1; \
  do :: si <= SLOT_WORKERS -> if :: exec[si] && LIVE_RUN(si) -> nLive++ :: else -> skip fi; si++ \
     :: else -> break od; \
  REQUIRE(at_most_max, nLive <= SLOT_MAX); nLive = 0; si = 0

/* Locks go when the transaction ends (commit or rollback). */
#define UNLOCK_MINE(w) \
  si = 0; do :: si < SLOT_MAX -> if :: slotLock[si] == (w) -> slotLock[si] = 0 :: else -> skip fi; si++ \
             :: else -> break od; si = 0

/* The UPDATE that takes slot s: its holder read again in the same statement. */
#ifdef V_SLOT_NO_LOCK
#define TAKE_GUARD(s) true /* read-then-write: the row written whatever it holds now */
#else
#define TAKE_GUARD(s) (!HELD(s))
#endif
#define TAKE(s, w) \
  REQUIRE(slot_one_owner, !HELD(s)); holder[s] = (w); mine = (s); got = 1; exec[w] = 1; CHECK_HOLDERS

proctype slotWorker(byte w) {
  byte s, mine;
  bit free, got, ok;
acquire:
  s = 0;
  do
  :: s < SLOT_MAX && !got ->
     d_step { free = !HELD(s) }; /* the snapshot's candidate */
     if
     :: free ->
        MAYBE_CRASH;
#ifndef V_SLOT_NO_LOCK
        d_step { if :: slotLock[s] == 0 -> slotLock[s] = w :: else -> free = 0 fi }; /* SKIP LOCKED */
        if :: free -> MAYBE_CRASH :: else -> skip fi;
#endif
        if
        :: free -> d_step { if :: TAKE_GUARD(s) -> TAKE(s, w); UNLOCK_MINE(w) :: else -> skip fi }
        :: else -> skip
        fi
     :: else -> skip
     fi;
     d_step { free = 0; s++ }
  :: else -> break
  od;
  if
  :: !got ->
     /* every slot held: the run stepped aside, the transaction commits */
     d_step { rSt[w] = R_SUSP; rLease[w] = L_NULL; UNLOCK_MINE(w); s = 0 };
     atomic { HELD_COUNT < SLOT_MAX -> rSt[w] = R_RUN; rLease[w] = L_LIVE }; /* takeDueRuns, the take */
     goto acquire
  :: else -> skip
  fi;
  /* the holder's work */
  MAYBE_CRASH;
  /* a phase commit (advance_run, 0022): fenced by the owner token and, under
   * a limit, by the slot: its row locked FOR KEY SHARE (waits for a taker's
   * lock), the lease re-armed only while the slot names it or, with no slot
   * naming it, while the lease is live; refused, the attempt stops */
  if
  :: d_step {
       slotLock[mine] == 0 ->
#ifdef V_SLOT_COMMIT_UNFENCED
       rLease[w] = L_LIVE; ok = 1;
#else
       if :: holder[mine] == w || rLease[w] == L_LIVE -> rLease[w] = L_LIVE; ok = 1 :: else -> ok = 0 fi;
#endif
       CHECK_HOLDERS
     };
     if
     :: !ok ->
        d_step { exec[w] = 0; got = 0; mine = 0; rLease[w] = L_LIVE };
        goto acquire
     :: else -> ok = 0
     fi
  :: true -> skip
  fi;
  MAYBE_CRASH;
  if
  :: d_step { /* renew_slot_lease: waits for a taker's lock, then renews only while the slot is its own */
       slotLock[mine] == 0 ->
       if :: holder[mine] == w -> rLease[w] = L_LIVE; ok = 1 :: else -> ok = 0 fi;
       CHECK_HOLDERS
     };
     if
     :: !ok -> /* the slot is gone: the attempt stops; the run is taken over (a new attempt) */
        d_step { exec[w] = 0; got = 0; mine = 0; rLease[w] = L_LIVE };
        goto acquire
     :: else -> ok = 0
     fi
  :: true -> skip
  fi;
  MAYBE_CRASH;
  d_step { rSt[w] = R_DONE; rLease[w] = L_NULL; exec[w] = 0; settled++; got = 0; mine = 0 }; /* completion */
  goto stopped;
crashed:
  skip;
  d_step { exec[w] = 0; dead[w] = 1; settled++; UNLOCK_MINE(w); s = 0; got = 0; free = 0; mine = 0 };
stopped:
  skip
}

/* Leases end: a dead worker's at any moment, a live one's within a budget. */
#define LEASE_ENDS(w) \
  :: d_step { rLease[w] == L_LIVE && (dead[w] || slowLeases > 0) -> \
              if :: !dead[w] -> slowLeases-- :: else -> skip fi; rLease[w] = L_EXPIRED }

proctype slotClock() {
end_tick:
  do
  LEASE_ENDS(1) LEASE_ENDS(2) LEASE_ENDS(3)
  od
}
#endif
