-- Why: a replay (and a 409) is the commonest claim, and the claim of 0008
-- tried the INSERT first even when the key exists: the insert's tuple and its
-- conflict check cost more than the read that answers a replay. The claim now
-- reads the key first and answers an existing record from that read; only a
-- key it did not find goes on to the INSERT ... ON CONFLICT DO NOTHING of
-- 0008, unchanged. Measured with pgbench, 16 clients, prepared: the replay's
-- call ran 36 000 tps against 20 000-24 000 (docs/benchmarks.md).
-- Race: another first request may commit the key between the read and the
-- INSERT. ON CONFLICT waits for that request's transaction, so once the
-- INSERT has conflicted the record is committed, and a second read (a new
-- statement, so a new snapshot) answers with it. If it is gone again by then
-- (forgotten or swept), the answer is "raced" and the engine asks again.
-- Same arguments and result columns as 0008, so prepared calls stay valid.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The claim: read the key; absent, insert it (or read what a racing claim committed).
CREATE OR REPLACE FUNCTION claim_new_key(
  p_tenant_id text, p_key text, p_run_id text, p_workflow text, p_workflow_version integer, p_definition json,
  p_definition_hash text, p_fingerprint text, p_input json, p_parsed_input_hash text, p_owner_token text,
  p_lease_ms float8, p_retention_ms bigint
) RETURNS TABLE (
  claimed boolean, workflow text, fingerprint text, status text, lease_remaining_ms float8, expired boolean,
  outcome text, parked_reason text, response_status integer, response_body text, wake_remaining_ms float8
) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
  FOR round IN 1..2 LOOP
    RETURN QUERY
    SELECT false AS claimed,
           r.workflow, r.fingerprint, r.status,
           GREATEST(0, ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000))::float8 AS lease_remaining_ms,
           (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
           r.outcome, r.parked_reason, r.response_status, r.response_body::text AS response_body,
           CASE WHEN r.status = 'suspended'
                THEN ceil(extract(epoch FROM (r.wake_at - clock_timestamp())) * 1000)::float8 END AS wake_remaining_ms
    FROM runs r
    WHERE r.tenant_id = p_tenant_id AND r.key = p_key;
    IF FOUND THEN
      RETURN;
    END IF;
    IF round = 2 THEN
      -- The record the INSERT collided with is gone again (forgotten, swept): the engine asks again.
      RETURN QUERY SELECT false, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8;
      RETURN;
    END IF;
    INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                      input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                      workflow_version)
    VALUES (p_tenant_id, p_key, p_run_id, p_workflow, p_definition,
            p_definition_hash, p_fingerprint, p_input, p_parsed_input_hash, 'in_flight',
            p_owner_token,
            clock_timestamp() + p_lease_ms * interval '1 millisecond', 1, p_retention_ms, p_workflow_version)
    ON CONFLICT (tenant_id, key) DO NOTHING;
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8;
      RETURN;
    END IF;
    -- A racing first request committed the key after the read: read again, in a new snapshot.
  END LOOP;
END
$$;
