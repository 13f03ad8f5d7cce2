-- Why: a takeover's trace links to the attempt it replaced. Each attempt that is
-- traced writes its span's W3C traceparent here; the next attempt reads it back.
-- Written only when the application records traces, so untraced runs never touch it.

ALTER TABLE runs ADD COLUMN trace_parent text;
