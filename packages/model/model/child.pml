/* Part of idempo.pml, which includes it (spin -DCHILD idempo.pml); not a model on its own. */

#ifdef CHILD
/* ---- a parent starting child runs (.child / .map; store/children.ts)
 *
 * One parent run whose item starts NC children. The transaction that
 * records the item's start creates the children, each under a key derived
 * from the parent's (tenant, key, item, index), and suspends the parent
 * waiting for them; the completion of the last child (a trigger, in the
 * child's completing transaction, under the parent's row lock) makes the
 * parent due; a worker takes it and reads the children's results (the
 * fan-in, by the same derived keys). Two workers: the first holds the
 * parent at the start, the second takes it over once a lease ends; either
 * may crash before any statement (and is restarted). Children are run by
 * a child worker (each child's own run is the key's protocol above, so its
 * completion is one step here); the sweeper deletes completed children
 * past retention, but never one whose parent has not completed. Every take of the
 * parent (takeover, due take) starts a new attempt. */
#ifndef NC
#define NC 2
#endif
#define P_RUN 1   /* in flight, owned */
#define P_WAIT 2  /* suspended, waiting for its children (wait_kind 'children') */
#define P_DUE 3   /* suspended and due: the last child completed */
#define P_DONE 4
#define C_QUEUED 1
#define C_DONE 2
#define NKEYS (NC * 3)

byte pSt = P_RUN, pOwner = 1, pLease = L_LIVE, pAtt = 1, pRp; /* pRp 0: item not started, 1: started */
byte childSt[NKEYS];  /* idempo.runs rows of the children, by key */
byte childExp[NKEYS]; /* their expires_at */
byte leaseEnds = CRASHES; /* lease ends of a parent whose worker is still alive (finite, for liveness) */
bit alive[3];         /* ghost: the attempt owning the parent is still running */
/* ghosts */
byte rowsOf[NC];      /* rows ever created for child index i, under any key */
bit child_once = 1, child_kept = 1, children_found = 1, parent_after_children = 1, child_not_swept = 1;

/* The key of child i as attempt a computes it. */
#ifdef V_CHILD_KEY_PER_ATTEMPT
#define CKEY(i, a) ((i) + NC * ((a) - 1))
#else
#define CKEY(i, a) (i) /* deriveChildKey(tenant, parent key, item, index): no attempt */
#endif

#define PFENCE(w) (pOwner == (w) && pSt == P_RUN)

/* INSERT ... ON CONFLICT DO NOTHING of every child under its key, in the
 * start's transaction. */
inline createChildren(a, k) {
  k = 0;
  do
  :: k < NC ->
     if
     :: childSt[CKEY(k, a)] == 0 ->
        childSt[CKEY(k, a)] = C_QUEUED; rowsOf[k]++;
        REQUIRE(child_once, rowsOf[k] == 1)
     :: else -> skip /* the same child: a no-op */
     fi;
     k++
  :: else -> break
  od;
  k = 0
}

/* Suspend the parent waiting for its children: no owner, no lease. */
#define P_SUSPEND pSt = P_WAIT; pOwner = 0; pLease = L_NULL

/* No child row is left uncompleted (the trigger's count of the siblings). */
#define ALL_CHILDREN_DONE \
  (childSt[0] != C_QUEUED && childSt[1] != C_QUEUED && childSt[2] != C_QUEUED && \
   childSt[3] != C_QUEUED && childSt[4] != C_QUEUED && childSt[5] != C_QUEUED)

proctype parentWorker(byte w) {
  byte myAtt, k;
  bit ok;
  if :: w == 1 -> myAtt = 1; goto resume :: else -> skip fi;
take:
  /* takeOverExpiredLease, or the take of a due run */
  atomic {
    if
    :: pSt == P_RUN && pLease == L_EXPIRED -> skip
    :: pSt == P_DUE -> skip
    :: pSt == P_DONE -> goto stopped
    fi;
    pSt = P_RUN; pOwner = w; pLease = L_LIVE; alive[w] = 1;
    if :: pAtt < 3 -> pAtt++ :: else -> skip fi;
    myAtt = pAtt
  };
resume:
  skip;
  if
  :: pRp == 0 -> /* the item's start */
     MAYBE_CRASH;
#ifdef V_CHILD_APART
     d_step { /* the start recorded on its own ... */
       if :: PFENCE(w) -> pRp = 1; pLease = L_LIVE; ok = 1 :: else -> ok = 0 fi
     };
     if :: !ok -> goto lost :: else -> skip fi;
     MAYBE_CRASH;
     d_step { /* ... and the children created in the next transaction */
       if :: PFENCE(w) -> createChildren(myAtt, k); P_SUSPEND; ok = 1 :: else -> ok = 0 fi
     };
#else
     d_step { /* one transaction: the start, the children, the parent's suspension */
       if :: PFENCE(w) -> pRp = 1; createChildren(myAtt, k); P_SUSPEND; ok = 1 :: else -> ok = 0 fi
     };
#endif
     if :: !ok -> goto lost :: else -> alive[w] = 0; ok = 0 fi
  :: pRp == 1 -> /* resumed after the start: the fan-in */
     MAYBE_CRASH;
     d_step {
       if
       :: PFENCE(w) ->
          REQUIRE(child_kept, rowsOf[0] > 0 && rowsOf[1] > 0);
          REQUIRE(children_found, childSt[CKEY(0, myAtt)] != 0 && childSt[CKEY(1, myAtt)] != 0);
          REQUIRE(parent_after_children, childSt[CKEY(0, myAtt)] == C_DONE && childSt[CKEY(1, myAtt)] == C_DONE);
          pSt = P_DONE; pOwner = 0; pLease = L_NULL; ok = 1
       :: else -> ok = 0
       fi
     };
     if :: !ok -> goto lost :: else -> ok = 0 fi
  fi;
  alive[w] = 0;
  goto take;
lost: /* LeaseLostError: another attempt owns the parent */
crashed: /* the worker restarts */
  skip;
  d_step { alive[w] = 0; ok = 0; k = 0; myAtt = 0 };
  goto take;
stopped:
  skip
}

/* A child's completion, and the trigger in its transaction: the parent
 * waiting for its children becomes due when none is left uncompleted. */
#define CHILD_COMPLETES(k) \
  :: d_step { childSt[k] == C_QUEUED -> childSt[k] = C_DONE; childExp[k] = E_LATER; \
              if :: pSt == P_WAIT && ALL_CHILDREN_DONE -> pSt = P_DUE :: else -> skip fi }

#ifdef V_SWEEP_WAITING_CHILD
#define SWEEP_GUARD true
#else
#define SWEEP_GUARD (pSt == P_DONE) /* sweepBatch keeps a child whose parent has not completed */
#endif
/* sweepBatch on a child: completed, past retention, its parent completed
 * (until then the parent waits for it, or is about to read it). */
#define CHILD_SWEPT(k) \
  :: d_step { childSt[k] == C_DONE && childExp[k] == E_PASSED && SWEEP_GUARD -> \
              REQUIRE(child_not_swept, pSt == P_DONE); \
              childSt[k] = 0; childExp[k] = E_NULL }
#define CHILD_RETAINED(k) :: d_step { childExp[k] == E_LATER -> childExp[k] = E_PASSED }

/* The child worker, the sweeper and the clock of the children. */
proctype children() {
end_idle:
  do
  CHILD_COMPLETES(0) CHILD_COMPLETES(1) CHILD_COMPLETES(2)
  CHILD_COMPLETES(3) CHILD_COMPLETES(4) CHILD_COMPLETES(5)
  CHILD_SWEPT(0) CHILD_SWEPT(1) CHILD_SWEPT(2) CHILD_SWEPT(3) CHILD_SWEPT(4) CHILD_SWEPT(5)
  CHILD_RETAINED(0) CHILD_RETAINED(1) CHILD_RETAINED(2)
  CHILD_RETAINED(3) CHILD_RETAINED(4) CHILD_RETAINED(5)
  od
}

/* The parent's lease ends: at any moment when its attempt is gone, within
 * a finite budget while it still runs (a paused worker). */
proctype parentClock() {
end_tick:
  do
  :: d_step { pLease == L_LIVE && !alive[pOwner] -> pLease = L_EXPIRED }
  :: d_step { pLease == L_LIVE && alive[pOwner] && leaseEnds > 0 -> leaseEnds--; pLease = L_EXPIRED }
  od
}
#endif
