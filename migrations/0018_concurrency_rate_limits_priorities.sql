-- Why: a limit on how many runs of one kind execute at once (one account
-- synced at a time, at most five calls to a slow partner) was a limit per
-- worker, so N workers ran N times it; a provider's rate limit was kept by
-- nobody across processes; and a worker took due runs oldest first with no
-- way to put urgent ones ahead. Now:
--
-- * Concurrency slots: a workflow's `.concurrency({ key, max })` gives each
--   key `max` rows of concurrency_slots. An attempt holds a slot while the
--   run it names is in flight under that attempt's owner token and lease:
--   the slot is the lease, so completing, suspending, releasing, a takeover
--   or a lease that runs out (a SIGKILLed process) frees it without a write.
--   acquire_concurrency_slot takes a free slot for the attempt that has just
--   taken its run, or steps the run aside (suspended and due, nobody
--   holding it) when every slot is held. Workers skip due runs whose key has
--   no free slot. A holder's heartbeat renews through renew_slot_lease,
--   which locks its slot row first, so a renewal and a taker of that slot
--   never both win.
-- * Rate limits: one rate_limits row per limit name (createEngine's
--   `rateLimits`), a token bucket refilled on the database clock and taken
--   under its row lock by take_rate_token, which also reserves a token due
--   later when the caller can wait that long (so waiters never poll).
-- * Priorities: runs.priority (enqueue's `priority`, NULL for the
--   workflow's own `.priority`), ordering each tenant's due runs; an index
--   over the runs enqueued with one finds them behind any backlog.
--
-- Nothing here is on the path of a workflow that uses none of them: the
-- new columns are NULL, no existing function changes, and the statements
-- below run only for workflows and steps that ask for them.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The limit a run was last admitted under (its workflow's name and the key
-- its `.concurrency` computed, joined by U+001F) and its `max`, so a worker
-- can skip it while the key has no free slot; NULL for runs of workflows
-- without one. And the priority it was enqueued with.
ALTER TABLE runs
  ADD COLUMN concurrency_key text,
  ADD COLUMN concurrency_max integer,
  ADD COLUMN priority integer;

-- Workers: due runs enqueued with a priority, highest first, wherever they
-- stand in wake-up order. Only those runs are in it.
CREATE INDEX runs_suspended_priority ON runs (priority DESC, wake_at)
  WHERE status = 'suspended' AND priority IS NOT NULL;

-- One row per slot of each concurrency key, made on the key's first use;
-- (tenant_id, key, owner_token) name the attempt that took it last. Keys
-- span tenants (a limit may be global), so the table is keyed by the limit,
-- not by tenant (under Citus, a reference table).
CREATE TABLE concurrency_slots (
  limit_key   text    NOT NULL,
  slot        integer NOT NULL,
  tenant_id   text,
  key         text,
  owner_token text,
  CONSTRAINT concurrency_slots_pkey PRIMARY KEY (limit_key, slot)
);

-- One token bucket per rate limit name, shared by every process: `tokens`
-- as of `refilled_at` (database clock), below zero while tokens are
-- reserved by callers waiting for them.
CREATE TABLE rate_limits (
  name        text             NOT NULL,
  tokens      double precision NOT NULL,
  refilled_at timestamptz      NOT NULL,
  CONSTRAINT rate_limits_pkey PRIMARY KEY (name)
);

-- True while the attempt (tenant, key, owner token) holds its run in
-- flight under a lease that has not run out: what holding a slot means.
CREATE OR REPLACE FUNCTION slot_holder_live(p_tenant_id text, p_key text, p_owner_token text) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
  SELECT EXISTS (
    SELECT 1 FROM runs
    WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token
      AND status = 'in_flight' AND locked_until > clock_timestamp()
  )
$$;

-- How many of the first p_max slots of a key are held now.
CREATE OR REPLACE FUNCTION concurrency_slots_held(p_limit_key text, p_max integer) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
  SELECT count(*)::int FROM concurrency_slots
  WHERE limit_key = p_limit_key AND slot < p_max AND slot_holder_live(tenant_id, key, owner_token)
$$;

-- Take a free slot of p_limit_key for the attempt that owns the run
-- (answer 'acquired'), or, with every one of its p_max slots held, step the
-- run aside: suspended, due, no owner (answer 'full', with the ms until the
-- first holder's lease ends); 'lost' when the attempt no longer owns the run.
-- Races: two takers of one slot, and a taker against the holder's renewal.
-- A slot that looks free is locked (SKIP LOCKED: a row another taker or a
-- renewal holds is held) before its holder is read again, in a new
-- statement, so that read sees every commit made before the lock; the
-- holder's renewal locks the row too. A slot freed after the first look is
-- missed (the answer is 'full' once), never one taken twice.
CREATE OR REPLACE FUNCTION acquire_concurrency_slot(
  p_tenant_id text, p_key text, p_owner_token text, p_limit_key text, p_max integer
) RETURNS TABLE (outcome text, retry_after_ms float8) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_slot integer;
BEGIN
  IF (SELECT count(*) FROM concurrency_slots WHERE limit_key = p_limit_key AND slot < p_max) < p_max THEN
    INSERT INTO concurrency_slots (limit_key, slot)
    SELECT p_limit_key, g FROM generate_series(0, p_max - 1) AS g
    ON CONFLICT (limit_key, slot) DO NOTHING;
  END IF;
  -- The slots that look free in this snapshot; each is locked and read again before it is taken.
  FOR v_slot IN
    SELECT s.slot FROM concurrency_slots s
    WHERE s.limit_key = p_limit_key AND s.slot < p_max AND NOT slot_holder_live(s.tenant_id, s.key, s.owner_token)
    ORDER BY s.slot
  LOOP
    PERFORM 1 FROM concurrency_slots WHERE limit_key = p_limit_key AND slot = v_slot FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    UPDATE concurrency_slots s SET tenant_id = p_tenant_id, key = p_key, owner_token = p_owner_token
    WHERE s.limit_key = p_limit_key AND s.slot = v_slot AND NOT slot_holder_live(s.tenant_id, s.key, s.owner_token);
    IF FOUND THEN
      UPDATE runs SET concurrency_key = p_limit_key, concurrency_max = p_max
      WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
        AND (concurrency_key IS DISTINCT FROM p_limit_key OR concurrency_max IS DISTINCT FROM p_max);
      RETURN QUERY SELECT 'acquired'::text, NULL::float8;
      RETURN;
    END IF;
  END LOOP;
  -- Every slot is held: the run waits as a due suspended run, keeping its
  -- place in wake-up order and its wait's deadline; a sleep it woke from is over.
  UPDATE runs
  SET status = 'suspended', owner_token = NULL, locked_until = NULL, durable = true,
      wake_at = LEAST(coalesce(wake_at, clock_timestamp()), clock_timestamp()),
      wait_kind = CASE WHEN wait_kind = 'sleep' THEN NULL ELSE wait_kind END,
      wait_name = CASE WHEN wait_kind = 'sleep' THEN NULL ELSE wait_name END,
      concurrency_key = p_limit_key, concurrency_max = p_max, updated_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight';
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'lost'::text, NULL::float8;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT 'full'::text,
         coalesce(GREATEST(1, ceil(min(extract(epoch FROM (h.locked_until - clock_timestamp())) * 1000))), 1)::float8
  FROM concurrency_slots s
  JOIN runs h ON h.tenant_id = s.tenant_id AND h.key = s.key AND h.owner_token = s.owner_token
  WHERE s.limit_key = p_limit_key AND s.slot < p_max
    AND h.status = 'in_flight' AND h.locked_until > clock_timestamp();
END
$$;

-- The heartbeat of an attempt that holds a slot: renew_lease, only while
-- the slot is still its own. The slot row is locked first (KEY SHARE), so
-- a taker that found the lease run out and took the slot makes this
-- renewal fail, and a taker that comes later finds the lease renewed.
CREATE OR REPLACE FUNCTION renew_slot_lease(
  p_tenant_id text, p_key text, p_owner_token text, p_lease_ms float8, p_limit_key text
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM concurrency_slots
  WHERE limit_key = p_limit_key AND tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token
  FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN renew_lease(p_tenant_id, p_key, p_owner_token, p_lease_ms);
END
$$;

-- Take one token of the bucket p_name (p_per_ms tokens per ms, at most
-- p_burst stored; the bucket starts full), under its row lock: answer
-- taken with the ms until the token is earned (0 when one is there). A
-- token due within p_max_wait_ms (NULL: any time) is reserved now, so the
-- caller sleeps that long and goes, and later callers queue behind it; one
-- due later is not taken (taken false, and the ms until one would be due).
CREATE OR REPLACE FUNCTION take_rate_token(
  p_name text, p_per_ms float8, p_burst float8, p_max_wait_ms float8
) RETURNS TABLE (taken boolean, wait_ms float8) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_tokens float8;
  v_at timestamptz;
  v_now timestamptz;
  v_avail float8;
  v_wait float8;
BEGIN
  SELECT r.tokens, r.refilled_at INTO v_tokens, v_at FROM rate_limits r WHERE r.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO rate_limits (name, tokens, refilled_at) VALUES (p_name, p_burst, clock_timestamp())
    ON CONFLICT (name) DO NOTHING;
    SELECT r.tokens, r.refilled_at INTO v_tokens, v_at FROM rate_limits r WHERE r.name = p_name FOR UPDATE;
  END IF;
  -- Read after the lock: the tokens as every earlier taker left them.
  v_now := clock_timestamp();
  v_avail := LEAST(p_burst, v_tokens + GREATEST(0, extract(epoch FROM (v_now - v_at)) * 1000) * p_per_ms);
  v_wait := GREATEST(0, (1 - v_avail) / p_per_ms);
  IF p_max_wait_ms IS NULL OR v_wait <= p_max_wait_ms THEN
    UPDATE rate_limits SET tokens = v_avail - 1, refilled_at = v_now WHERE name = p_name;
    RETURN QUERY SELECT true, ceil(v_wait)::float8;
  ELSE
    RETURN QUERY SELECT false, ceil(v_wait)::float8;
  END IF;
END
$$;
