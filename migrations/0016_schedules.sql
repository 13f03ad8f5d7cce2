-- Why: a job that must run every night (or every minute) needed a cron outside
-- idempo, and two replicas of that cron started the job twice. A schedule is
-- now a row: every worker may fire it, and the first to lock the row starts
-- the run of each due tick and moves the row to its next tick in the same
-- transaction. The run's key is derived from the schedule's name and the
-- tick's time, so even two workers that both fire one tick make one run.
--
-- Schedules are named across tenants (`engine.unschedule(name)`), so the
-- primary key is the name alone: a small table of configuration, not of
-- per-tenant data (under Citus, a reference table). The run each tick
-- starts carries the schedule's tenant like any other run.
--
-- The cron expression and the time zone are evaluated by the engine (the
-- library that knows daylight saving), never in SQL; the row keeps the first
-- tick not yet fired, so firing reads one index on it.
CREATE TABLE schedules (
  name text PRIMARY KEY,
  tenant_id text NOT NULL,
  workflow text NOT NULL,
  cron text NOT NULL,
  timezone text NOT NULL,
  catch_up text NOT NULL CHECK (catch_up IN ('none', 'latest', 'all')),
  -- How late a tick may be fired and still count as on time, not missed.
  grace_ms integer NOT NULL CHECK (grace_ms >= 0),
  -- True when the input comes from a function given to engine.schedule in
  -- the process: only a process that registered it can fire such a tick.
  has_input boolean NOT NULL,
  paused boolean NOT NULL DEFAULT false,
  -- The first tick not yet fired (or skipped); NULL when the expression has no tick left.
  next_tick_at timestamptz,
  -- The last tick a run was started for, and when (DB clock).
  last_tick_at timestamptz,
  last_fired_at timestamptz,
  -- Why the last tick could not start its run (NULL once one does).
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- What a firing round reads: due rows, by the time they compare with now().
CREATE INDEX schedules_due ON schedules (next_tick_at) WHERE NOT paused;
