/*
 * fenced's protocol, model-checked by SPIN: leases, fencing tokens, fences, the fire claim.
 * `pnpm model` checks it exhaustively within the bounds below, then checks that SPIN rejects each
 * classic bug (a -D variant) with a counterexample (scripts/model/run-model.ts).
 *
 * Bounds: NODES nodes, RESOURCES resources, at most TERMS grants (terms), FIRES fires (fire f writes
 * resource f % RESOURCES), FAULTS faults (a lease lost to expiry or a pause, a write's session killed
 * before its commit), and at most one lossy failover of the lease store, which forgets its holder
 * and its latest grants (the counter goes back by one or two).
 *
 * Each step, and what it is in the code:
 * - grant: the store grants a free lease and mints the next token of its counter in the same step
 *   (the acquire script; the SQL stores' grant statement);
 * - advance: the election raises each fence to the new token, strictly, one resource at a time
 *   (Coordinator #advanceFences, Fence.advance). A fence that already holds the token or more means
 *   the store lost data: the node does not lead, raises the store's counter to that fence (the
 *   repair, #repairCounter) and the lease is elected again;
 * - write: the guard's fast path refuses a token below its mark (the Redis mark, final); the write's
 *   transaction checks the token against the fence, raises it and claims the fire in one atomic
 *   step, or refuses it (stale, duplicate), or dies before its commit (a killed session: nothing of
 *   it applies); after the commit the mark is raised;
 * - a leader dispatches the due fire with the lowest id not yet applied (the scheduler's catch-up
 *   reads the fence store's claims), again until it takes effect (the scheduler owns at-least-once).
 *   A fire refused as stale ends the term (Coordinator.supersede): the counter is raised to the
 *   refusing token and the lease given back;
 * - a node deposed without noticing (a pause, a renew not failed yet) writes with its old token,
 *   up to STALE times, then notices. Any step of any node may wait any time: holders pause for any
 *   time, between any two steps.
 *
 * Properties:
 * - P1 (assert): no write commits with a token below its resource's fence: committed tokens per
 *   resource never decrease, and no write of a term commits after a newer token raised the fence;
 * - P2 (assert): with no lossy failover, no write of a term commits after a later term raised the
 *   fence (terms ordered by their grants: tokens follow the grants);
 * - P3 (assert): a token commits writes for one term only (a token minted twice after a lossy
 *   failover never writes for the second term);
 * - P4 (assert): each fire takes effect at most once;
 * - P5 (assert): the fast path refuses only what the fence refuses (its mark never runs ahead);
 * - P6 (assert): once a term was refused by a fence (a refused advance, a stale write), every later
 *   grant mints above that fence (the repair), until the store loses data again;
 * - P7 (LTL, weak fairness): every fire takes effect once the faults are over.
 * - the bound: the protocol asserts that it never needs more than TERMS grants, so no behaviour of
 *   it is cut short by the bound (a variant just stops granting there).
 *
 * Two configurations: ADVANCE=1, a coordinator given its fences (advanced at each election), with
 * the lossy failover; ADVANCE=0, a coordinator given none (the fences rise with writes only), whose
 * lease store never loses data (nothing could repair it: docs/fencing-model.md says so).
 *
 * Variants, each a classic bug SPIN must reject:
 * - BUG_MINT_AFTER_GRANT: the token is minted by a second call after the grant (SET NX, then INCR);
 * - BUG_CHECK_OUTSIDE_TX: the fence is checked before the write's transaction, not inside it;
 * - BUG_ADVANCE_NOT_STRICT: the election's advance accepts a fence that already holds its token;
 * - BUG_MARK_BEFORE_COMMIT: the fast-path mark is raised before the write commits;
 * - BUG_NO_CLAIM: no fire claim in the write's transaction;
 * - BUG_NO_REPAIR: a refused advance leaves the counter below the fence;
 * - BUG_STALE_KEEPS_TERM: a stale refusal stops the job but keeps the term (found by this model:
 *   after a lossy failover the leader keeps its lease while every write of its term is refused).
 */
#ifndef NODES
#define NODES 3
#endif
#ifndef RESOURCES
#define RESOURCES 2
#endif
#ifndef TERMS
#define TERMS 4
#endif
#ifndef FIRES
#define FIRES 2
#endif
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef STALE
#define STALE 1
#endif
#ifndef ADVANCE
#define ADVANCE 1
#endif
#define NONE 255
#ifdef BUG_NO_CLAIM
#define NO_CLAIM 1
#else
#define NO_CLAIM 0
#endif
#ifdef BUG_CHECK_OUTSIDE_TX
#define BUGGY_CHECK 1
#else
#define BUGGY_CHECK 0
#endif
#define RESOURCE(f) ((f) % RESOURCES)
#define ALL_APPLIED (applied[0] && applied[FIRES - 1])

/* The outcomes of a write. */
#define APPLIED 1
#define REFUSED_STALE 2
#define DUPLICATE 3
#define KILLED 4

/* The lease store. */
byte holder = NONE;          /* the node holding the lease, as the store has it */
byte counter = 0;            /* the token counter */
byte grants = 0;             /* grants made so far: a term's place in the order of grants */
bool lossy = false;          /* the one lossy failover happened */
byte repaired = 0;           /* the highest fence a term was refused by since the failover (P6) */
/* The fence store, and the fast path beside it. */
byte fence[RESOURCES];       /* the highest token committed or advanced to, per resource */
byte fenceTerm[RESOURCES];   /* the latest grant that raised it (for P2) */
byte mark[RESOURCES];        /* the fast path's mark */
bool claimed[FIRES];         /* the fire claims */
bool applied[FIRES];         /* each fire's effect (P4: at most once) */
byte tokenTerm[TERMS + 3];   /* the grant a token committed writes for; 0: none yet (P3) */
/* The nodes. */
byte belief[NODES];          /* the token a node believes it leads with; 0: none */
byte term[NODES];            /* the grant that node's belief came from */
byte faults = 0;

/* The fast path refuses `t` below its mark (final); else the transaction: check, raise, claim. */
inline write(me, t, f, outcome, highest) {
  if
  :: t < mark[RESOURCE(f)] ->
     assert(t < fence[RESOURCE(f)]); /* P5 */
     highest = mark[RESOURCE(f)];
     outcome = REFUSED_STALE
  :: else ->
#ifdef BUG_MARK_BEFORE_COMMIT
     if :: mark[RESOURCE(f)] < t -> mark[RESOURCE(f)] = t :: else -> skip fi;
#endif
#ifdef BUG_CHECK_OUTSIDE_TX
     if
     :: t < fence[RESOURCE(f)] -> highest = fence[RESOURCE(f)]; outcome = REFUSED_STALE
     :: else -> outcome = 0
     fi;
#endif
     atomic {
       if
#ifndef BUG_CHECK_OUTSIDE_TX
       :: t < fence[RESOURCE(f)] -> highest = fence[RESOURCE(f)]; outcome = REFUSED_STALE
#endif
#ifndef BUG_NO_CLAIM
       :: outcome == 0 && t >= fence[RESOURCE(f)] && claimed[f] -> outcome = DUPLICATE
#endif
       :: outcome == 0 && faults < FAULTS -> faults++; outcome = KILLED
       :: outcome == 0 && (t >= fence[RESOURCE(f)] || BUGGY_CHECK) && (!claimed[f] || NO_CLAIM) ->
          assert(t >= fence[RESOURCE(f)]);                            /* P1 */
          assert(lossy || term[me] >= fenceTerm[RESOURCE(f)]);         /* P2 */
          assert(tokenTerm[t] == 0 || tokenTerm[t] == term[me]);       /* P3 */
          assert(!applied[f]);                                         /* P4 */
          tokenTerm[t] = term[me];
          fence[RESOURCE(f)] = t;
          if :: fenceTerm[RESOURCE(f)] < term[me] -> fenceTerm[RESOURCE(f)] = term[me] :: else -> skip fi;
          claimed[f] = true;
          applied[f] = true;
          outcome = APPLIED
       :: else -> skip
       fi
     };
#ifndef BUG_MARK_BEFORE_COMMIT
     if :: outcome == APPLIED && mark[RESOURCE(f)] < t -> mark[RESOURCE(f)] = t :: else -> skip fi
#else
     skip
#endif
  fi
}

/* This node's term is over: raise the counter to `highest`, give the lease back, stop believing. */
inline stepDown(me, highest) {
  atomic {
    if :: repaired < highest -> repaired = highest :: else -> skip fi;
#ifndef BUG_NO_REPAIR
    if :: counter < highest -> counter = highest :: else -> skip fi;
#endif
    if :: holder == me -> holder = NONE :: else -> skip fi;
    belief[me] = 0;
    term[me] = 0
  }
}

proctype Node(byte me) {
  byte r, f, t, outcome, highest;
  bool stuck;  /* BUG_STALE_KEEPS_TERM: this term dispatches no more */
end:
  do
  /* An election: the grant, then the advance of every fence, one at a time. */
  :: atomic {
       holder == NONE && grants < TERMS ->
       assert(counter + 1 > repaired); /* P6 */
       grants++;
       holder = me;
       term[me] = grants;
       stuck = false;
#ifndef BUG_MINT_AFTER_GRANT
       counter++;
       belief[me] = counter
#endif
     };
#ifdef BUG_MINT_AFTER_GRANT
     atomic { counter++; belief[me] = counter };
#endif
#if ADVANCE
     r = 0;
     do
     :: r < RESOURCES ->
        atomic {
          if
#ifdef BUG_ADVANCE_NOT_STRICT
          :: fence[r] <= belief[me] -> fence[r] = belief[me]; if :: fenceTerm[r] < term[me] -> fenceTerm[r] = term[me] :: else -> skip fi; r++
#else
          :: fence[r] < belief[me] -> fence[r] = belief[me]; if :: fenceTerm[r] < term[me] -> fenceTerm[r] = term[me] :: else -> skip fi; r++
#endif
          :: else -> highest = fence[r]; r = NONE
          fi
        }
     :: r == NONE -> stepDown(me, highest); break
     :: r == RESOURCES -> break
     od;
     atomic { r = 0; highest = 0 }
#else
     skip
#endif
#ifndef VARIANT
  /* The bound: the protocol never needs more grants than TERMS (checked, so no behaviour is cut short). */
  :: atomic { holder == NONE && grants >= TERMS -> assert(false) }
#endif
  /* The leader dispatches the lowest fire not yet applied, until it takes effect. */
  :: atomic {
       holder == me && belief[me] != 0 && !stuck && !ALL_APPLIED ->
       if :: !claimed[0] -> f = 0 :: else -> f = FIRES - 1 fi;
       t = belief[me]
     };
     write(me, t, f, outcome, highest);
     if
     :: outcome == REFUSED_STALE ->
#ifdef BUG_STALE_KEEPS_TERM
        stuck = true
#else
        stepDown(me, highest)
#endif
     :: else -> skip
     fi;
     atomic { f = 0; t = 0; outcome = 0; highest = 0 }
  /* A node deposed without noticing writes with its old token (once), or notices. */
  :: atomic { belief[me] != 0 && holder != me -> t = belief[me] };
     if
     :: f = 0
     :: f = FIRES - 1
     fi;
     write(me, t, f, outcome, highest);
     atomic { belief[me] = 0; term[me] = 0; f = 0; t = 0; outcome = 0; highest = 0 }
  :: atomic { belief[me] != 0 && holder != me -> belief[me] = 0; term[me] = 0 }
  od
}

/* The faults: a lease lost (expiry or a pause), and one lossy failover of the lease store. */
active proctype Faults() {
end:
  do
  :: atomic { faults < FAULTS && holder != NONE -> holder = NONE; faults++ }
#if ADVANCE
  /*
   * A failover to an asynchronous replica that missed the last grant (the counter back by one), or a
   * restart without persistence (the counter back to 0). Only where fences are advanced at
   * election: nothing else can repair it.
   */
  :: atomic {
       !lossy ->
       lossy = true;
       holder = NONE;
       repaired = 0;
       if
       :: counter >= 1 -> counter = counter - 1
       :: counter = 0
       fi
     }
  :: faults >= FAULTS && lossy -> break
#else
  :: faults >= FAULTS -> break
#endif
  od
}

init {
  byte i = 0;
  atomic {
    do
    :: i < NODES -> run Node(i); i++
    :: else -> break
    od
  }
}

ltl every_fire_takes_effect { <> ALL_APPLIED }
