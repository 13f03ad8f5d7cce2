-- Why: a workflow can be deployed in several versions at once, so a run that
-- started under version 1 (and may sleep for days) finishes on version 1's
-- phases and steps while new runs take version 2. Each run records the version
-- that started it; a resume picks the deployed definition by this number.
-- Rows written before this migration were started by unversioned workflows,
-- which are version 1. A constant default and no constraint add the column
-- without rewriting or scanning the table (the builder checks the numbers).

ALTER TABLE runs ADD COLUMN workflow_version integer NOT NULL DEFAULT 1;
