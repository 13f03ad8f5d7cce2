-- Why: a `.child` or `.map` item starts child runs of another workflow and
-- suspends until they complete. A child is a run like any enqueued one, with
-- a link to its parent (the parent's key and run id, the item, its index),
-- created in the transaction that records the item's start under a key
-- derived from the parent's, so a crash never starts it twice. A child
-- waiting for a slot of its map's `concurrency` is suspended with no wake-up
-- time (wait_kind 'queued'); the parent waits with wait_kind 'children'.
-- A trigger on the child's completion, in the completing transaction, makes
-- the next queued sibling due and, when the last child completed, the
-- parent due: exactly once, whatever completes the child (its worker, a
-- cancel, the SQL interface). New columns, one index, one function and one
-- trigger: the release before this one keeps working during a rolling
-- deploy (it has no child items; its runs have no parent).
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The parent's key and run id, the item that started the child and its index in the item's inputs; NULL for other runs.
ALTER TABLE runs ADD COLUMN parent_key text;
ALTER TABLE runs ADD COLUMN parent_run_id text;
ALTER TABLE runs ADD COLUMN parent_item text;
ALTER TABLE runs ADD COLUMN child_index integer;

ALTER TABLE runs DROP CONSTRAINT runs_wait_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_wait_kind_check CHECK (wait_kind IN ('sleep', 'signal', 'children', 'queued'));

ALTER TABLE run_history DROP CONSTRAINT run_history_kind_check;
ALTER TABLE run_history ADD CONSTRAINT run_history_kind_check
  CHECK (kind IN ('phase', 'step', 'sleep', 'wait', 'parallel', 'branch', 'child', 'map'));

-- A parent's children by item, in input order: the fan-in read, the trigger's count and the next queued child.
CREATE INDEX runs_children ON runs (tenant_id, parent_key, parent_item, child_index) WHERE parent_key IS NOT NULL;
-- The sweeper's repair: children not completed, whose parent may have ended without them.
CREATE INDEX runs_open_children ON runs (tenant_id, parent_key) WHERE parent_key IS NOT NULL AND status <> 'completed';

-- A child just completed. The parent's row is locked first: a parent that
-- suspends locks its own row before it reads its children, so the two
-- serialise and the one that goes second sees the other (the lost wake-up:
-- a last child completing while its parent decides to wait). Under that
-- lock the next queued sibling becomes due (one completion frees one slot,
-- so at most `concurrency` children are runnable at once), and when no
-- sibling is left uncompleted, the parent waiting on the item becomes due.
CREATE OR REPLACE FUNCTION child_completed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_parent runs;
BEGIN
  SELECT * INTO v_parent FROM runs
  WHERE tenant_id = NEW.tenant_id AND key = NEW.parent_key AND run_id = NEW.parent_run_id
  FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  UPDATE runs SET wait_kind = NULL, wait_name = NULL, wake_at = clock_timestamp(), updated_at = clock_timestamp()
  WHERE (tenant_id, key) = (
    SELECT tenant_id, key FROM runs
    WHERE tenant_id = NEW.tenant_id AND parent_key = NEW.parent_key AND parent_item = NEW.parent_item
      AND parent_run_id = NEW.parent_run_id AND status = 'suspended' AND wait_kind = 'queued'
    ORDER BY child_index
    LIMIT 1
  );
  IF FOUND THEN
    PERFORM pg_notify('idempo_due', NEW.workflow);
  END IF;
  IF v_parent.status = 'suspended' AND v_parent.wait_kind = 'children' AND v_parent.wait_name = NEW.parent_item
     AND NOT EXISTS (
       SELECT 1 FROM runs
       WHERE tenant_id = NEW.tenant_id AND parent_key = NEW.parent_key AND parent_item = NEW.parent_item
         AND parent_run_id = NEW.parent_run_id AND status <> 'completed'
     ) THEN
    UPDATE runs SET wake_at = clock_timestamp(), updated_at = clock_timestamp()
    WHERE tenant_id = NEW.tenant_id AND key = NEW.parent_key;
    PERFORM pg_notify('idempo_due', v_parent.workflow);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER runs_child_completed AFTER UPDATE OF status ON runs
FOR EACH ROW WHEN (NEW.parent_key IS NOT NULL AND NEW.status = 'completed' AND OLD.status <> 'completed')
EXECUTE FUNCTION child_completed();
