-- Why: programs in other languages (a Python webhook handler, a Go billing
-- service) need to start runs and deliver signals without a TypeScript
-- process in their path. They get SQL functions in the engine's schema:
-- enqueue (in the caller's own transaction), signal, inspect, cancel and
-- list_runs, with the checks and the errors of the TypeScript API
-- (docs/sql-api.md). Each error has its own SQLSTATE of class IP and a
-- message that starts with the TypeScript error's code.
--
-- A fingerprint made in SQL must equal the one the engine makes for the
-- same value, or a retry through TypeScript of a request first sent
-- through SQL would be a mismatch. canonical_json writes RFC 8785 (JCS)
-- text from jsonb the way the engine's JCS library does from the parsed
-- value: members sorted by UTF-16 code units, strings escaped as
-- JSON.stringify escapes them, numbers spelled as ECMAScript spells the
-- double nearest to them (a number no double holds is refused).
--
-- A run needs its workflow's outline, version, retention and tombstone
-- time, which only the engine knows: every worker now registers the
-- versions it runs in workflow_versions, and enqueue takes the newest one.
-- Input and signal schemas (zod) cannot be checked in SQL: a signal sent
-- through SQL is stored unchecked and a run that cannot use it discards it
-- (0012); an input enqueued through SQL is parsed by the worker that takes
-- the run, which parks the run when the input fails the schema.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The workflow versions workers run, written by each worker when it starts
-- (engine.startWorker): what enqueue needs to create a run of a workflow it
-- knows only by name. Named across tenants, like schedules: a small table
-- of configuration (under Citus, a reference table).
CREATE TABLE workflow_versions (
  workflow        text        NOT NULL,
  version         integer     NOT NULL,
  -- The ordered "kind:name" list and its hash, as runs.definition holds them.
  definition      json        NOT NULL,
  definition_hash text        NOT NULL,
  -- The worker's engine's resolved retention and tombstone time, in ms.
  retention_ms    bigint      NOT NULL,
  tombstone_ms    bigint      NOT NULL,
  registered_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT workflow_versions_pkey PRIMARY KEY (workflow, version)
);

-- What inspect and cancel return: one key's record (or its tombstone, with
-- status 'expired' and only workflow, outcome and times), with its history.
CREATE TYPE run_record AS (
  tenant_id text,
  key text,
  run_id text,
  workflow text,
  workflow_version integer,
  status text,
  outcome text,
  response_status integer,
  response_body json,
  parked_reason text,
  waiting_for_kind text,
  waiting_for_name text,
  wake_at timestamptz,
  recovery_point text,
  attempt integer,
  lease_remaining_ms float8,
  input json,
  state json,
  created_at timestamptz,
  updated_at timestamptz,
  completed_at timestamptz,
  expires_at timestamptz,
  expired boolean,
  tombstone_until timestamptz,
  history json
);

-- What list_runs returns for each record: what a listing shows, and the
-- cursor that continues after it.
CREATE TYPE run_summary AS (
  tenant_id text,
  key text,
  workflow text,
  workflow_version integer,
  status text,
  parked_reason text,
  waiting_for_kind text,
  waiting_for_name text,
  wake_at timestamptz,
  recovery_point text,
  attempt integer,
  lease_remaining_ms float8,
  outcome text,
  response_status integer,
  created_at timestamptz,
  updated_at timestamptz,
  cursor text
);

-- Raise one of the interface's errors: SQLSTATE p_sqlstate (class IP), the
-- message the TypeScript error has, after its code and a colon.
CREATE OR REPLACE FUNCTION raise_error(p_sqlstate text, p_code text, p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = p_sqlstate, MESSAGE = p_code || ': ' || p_message;
END
$$;

-- How every message names a key, as errors.ts does.
CREATE OR REPLACE FUNCTION key_name(p_tenant_id text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 'idempotency key ''' || p_key || ''' (tenant ''' || p_tenant_id || ''')'
$$;

-- A time as JavaScript's toISOString prints it (UTC, milliseconds).
CREATE OR REPLACE FUNCTION iso_time(p_time timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_char(p_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The key rules of keys/key-validation.ts, in its order and words: a
-- string, not empty, at most 255 UTF-8 bytes, no control character
-- (category Cc), not only whitespace (what String.prototype.trim removes;
-- the control characters among it are refused before).
CREATE OR REPLACE FUNCTION check_key(p_value text, p_what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
BEGIN
  IF p_value IS NULL THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must be a string, got null');
  ELSIF p_value = '' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not be empty');
  ELSIF octet_length(p_value) > 255 THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' is longer than 255 UTF-8 bytes');
  ELSIF p_value ~ '[\u0001-\u001f\u007f-\u009f]' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not contain control characters');
  ELSIF p_value ~ '^[\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not be only whitespace');
  END IF;
END
$$;

-- The pair that names a run, tenant id first.
CREATE OR REPLACE FUNCTION check_run_key(p_tenant_id text, p_key text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM check_key(p_tenant_id, 'tenant id');
  PERFORM check_key(p_key, 'idempotency key');
END
$$;

-- A new ULID (26 Crockford base32 characters: 48 bits of milliseconds, 80
-- random bits), the form of the engine's ids.
CREATE OR REPLACE FUNCTION new_id() RETURNS text
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', substring(b.bits FROM i * 5 + 1 FOR 5)::integer + 1, 1),
                    '' ORDER BY i)
  FROM (SELECT B'00'
               || substring((floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)::bit(64) FROM 17 FOR 48)
               || substring(('x' || md5(gen_random_uuid()::text || gen_random_uuid()::text))::bit(128) FROM 1 FOR 80)
               AS bits) AS b,
       generate_series(0, 25) AS i
$$;

-- ---------------------------------------------------------------------------
-- Canonical JSON (RFC 8785) and fingerprints, equal to json/fingerprint.ts
-- ---------------------------------------------------------------------------

-- A string whose order under COLLATE "C" (code points) is the UTF-16 code
-- unit order of p_text: each code unit from U+D800 up is moved above the
-- BMP (a character of U+E000-U+FFFF by 0x10000, a supplementary one as its
-- two surrogates, each moved by 0x10000), so a supplementary character
-- sorts below U+E000 as in JavaScript. Below U+D800 nothing changes.
CREATE OR REPLACE FUNCTION utf16_sort_key(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT string_agg(CASE WHEN s.cp < 55296 THEN s.c
                         WHEN s.cp < 65536 THEN chr(s.cp + 65536)
                         ELSE chr(55296 + ((s.cp - 65536) >> 10) + 65536) || chr(56320 + ((s.cp - 65536) & 1023) + 65536)
                    END, '' ORDER BY s.n)
  FROM (SELECT t.c, ascii(t.c) AS cp, t.n FROM regexp_split_to_table(p_text, '') WITH ORDINALITY AS t (c, n)) AS s
$$;

-- A number as ECMAScript's Number::toString spells the double nearest to
-- it (what JSON.stringify and so JCS write), or NULL when no finite double
-- holds it (beyond about 1.8e308, or so small that it reads as 0). The
-- server's float8 output with extra_float_digits >= 1 gives the shortest
-- digits that read back as the same double (the digits JavaScript uses);
-- only where they go (fixed or exponent form) is rewritten.
CREATE OR REPLACE FUNCTION json_number_text(p_number numeric) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET extra_float_digits = 1 AS $$
DECLARE
  v_double float8;
  v_text text;
  v_sign text := '';
  v_exp integer := 0;
  v_at integer;
  v_int text;
  v_frac text := '';
  v_digits text;
  v_point integer;
  v_len integer;
BEGIN
  IF p_number = 0 THEN
    RETURN '0';
  END IF;
  IF abs(p_number) >= 1e308 OR abs(p_number) < 1e-307 THEN
    BEGIN
      v_double := p_number::float8;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      RETURN NULL;
    END;
  ELSE
    v_double := p_number::float8;
  END IF;
  v_text := v_double::text;
  IF left(v_text, 1) = '-' THEN
    v_sign := '-';
    v_text := substr(v_text, 2);
  END IF;
  v_at := strpos(v_text, 'e');
  IF v_at > 0 THEN
    v_exp := substr(v_text, v_at + 1)::integer;
    v_text := left(v_text, v_at - 1);
  END IF;
  v_at := strpos(v_text, '.');
  IF v_at > 0 THEN
    v_int := left(v_text, v_at - 1);
    v_frac := substr(v_text, v_at + 1);
  ELSE
    v_int := v_text;
  END IF;
  -- The value is 0.<digits> * 10^v_point.
  v_digits := v_int || v_frac;
  v_point := length(v_int) + v_exp - (length(v_digits) - length(ltrim(v_digits, '0')));
  v_digits := rtrim(ltrim(v_digits, '0'), '0');
  v_len := length(v_digits);
  IF v_len <= v_point AND v_point <= 21 THEN
    RETURN v_sign || v_digits || repeat('0', v_point - v_len);
  ELSIF 0 < v_point AND v_point <= 21 THEN
    RETURN v_sign || left(v_digits, v_point) || '.' || substr(v_digits, v_point + 1);
  ELSIF -6 < v_point AND v_point <= 0 THEN
    RETURN v_sign || '0.' || repeat('0', -v_point) || v_digits;
  END IF;
  RETURN v_sign || left(v_digits, 1) || CASE WHEN v_len > 1 THEN '.' || substr(v_digits, 2) ELSE '' END
         || 'e' || CASE WHEN v_point > 0 THEN '+' ELSE '-' END || abs(v_point - 1)::text;
END
$$;

-- The JCS spelling of a jsonb number's text (always plain decimal, never an
-- exponent). Inlined by the planner; the common cases need no float8: an
-- integer of at most 15 digits, and a decimal of at most 15 digits that is
-- not below 1e-6 (every decimal of 15 significant digits is the shortest
-- spelling of its double), which only loses trailing zeros.
CREATE OR REPLACE FUNCTION canonical_number(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN length(p_text) > 16 OR p_text LIKE '0.000000%' OR p_text LIKE '-0.000000%'
      THEN json_number_text(p_text::numeric)
    WHEN strpos(p_text, '.') = 0
      THEN CASE WHEN length(p_text) <= 15 THEN p_text ELSE json_number_text(p_text::numeric) END
    ELSE rtrim(rtrim(p_text, '0'), '.')
  END
$$;

-- The JCS text of a value at nesting depth p_depth (the whole value is at
-- 0), or NULL when something in it is refused: a number no double holds, or
-- a value nested deeper than 512 levels (json/json-value.ts's bound).
-- Strings, true, false and null are jsonb's own text: it escapes exactly
-- what JSON.stringify escapes (", \, and U+0000-U+001F, as \b \t \n \f \r
-- or lower-case \u00XX). The subqueries keep OFFSET 0 so the planner does
-- not pull them up and call the recursion once per reference.
CREATE OR REPLACE FUNCTION canonical_json_at(p_value jsonb, p_depth integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  v_type text := jsonb_typeof(p_value);
  v_text text;
  v_bad boolean;
BEGIN
  -- A member or element of a container at depth 512 is at 513: refused before the recursion goes deeper.
  IF p_depth >= 512 AND v_type IN ('object', 'array') AND p_value NOT IN ('{}'::jsonb, '[]'::jsonb) THEN
    RETURN NULL;
  END IF;
  IF v_type = 'object' THEN
    SELECT '{' || coalesce(string_agg(m.member, ',' ORDER BY m.sort_key COLLATE "C"), '') || '}',
           coalesce(bool_or(m.member IS NULL), false)
    INTO v_text, v_bad
    FROM (SELECT CASE WHEN e.key ~ '[\ue000-\U0010ffff]' THEN utf16_sort_key(e.key) ELSE e.key END AS sort_key,
                 to_jsonb(e.key)::text || ':' || CASE jsonb_typeof(e.value)
                   WHEN 'object' THEN canonical_json_at(e.value, p_depth + 1)
                   WHEN 'array' THEN canonical_json_at(e.value, p_depth + 1)
                   WHEN 'number' THEN canonical_number(e.value::text)
                   ELSE e.value::text END AS member
          FROM jsonb_each(p_value) AS e OFFSET 0) AS m;
  ELSIF v_type = 'array' THEN
    SELECT '[' || coalesce(string_agg(m.item, ',' ORDER BY m.n), '') || ']', coalesce(bool_or(m.item IS NULL), false)
    INTO v_text, v_bad
    FROM (SELECT a.n, CASE jsonb_typeof(a.value)
                   WHEN 'object' THEN canonical_json_at(a.value, p_depth + 1)
                   WHEN 'array' THEN canonical_json_at(a.value, p_depth + 1)
                   WHEN 'number' THEN canonical_number(a.value::text)
                   ELSE a.value::text END AS item
          FROM jsonb_array_elements(p_value) WITH ORDINALITY AS a (value, n) OFFSET 0) AS m;
  ELSIF v_type = 'number' THEN
    RETURN canonical_number(p_value::text);
  ELSE
    RETURN p_value::text;
  END IF;
  RETURN CASE WHEN v_bad THEN NULL ELSE v_text END;
END
$$;

-- The RFC 8785 canonical JSON text of a value, as json/fingerprint.ts
-- writes it for the same value; NULL when canonical_json_at refuses it.
CREATE OR REPLACE FUNCTION canonical_json(p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path FROM CURRENT AS $$
  SELECT canonical_json_at(p_value, 0)
$$;

-- A path as json/json-path.ts prints it, after p_root ('$', 'payload',
-- 'body'): `.name` or `."a b"` for a member, `[3]` for an element, and past
-- twelve segments the first four and the last two around a count.
CREATE OR REPLACE FUNCTION json_path_text(p_root text, p_segments text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT p_root || CASE
    WHEN coalesce(cardinality(p_segments), 0) <= 12 THEN array_to_string(p_segments, '')
    ELSE array_to_string(p_segments[1:4], '') || '…(' || (cardinality(p_segments) - 6)::text || ' levels)…'
         || array_to_string(p_segments[cardinality(p_segments) - 1:], '')
  END
$$;

-- The first thing canonical_json_at refuses in a value, as
-- `<path>: <message>` with the path after p_root; NULL when there is none.
-- Depth first, members in jsonb's order, without recursion (a stack of
-- what is left to look at), so a deep value costs no server stack.
CREATE OR REPLACE FUNCTION json_issue(p_value jsonb, p_root text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
  v_stack jsonb[] := ARRAY[jsonb_build_object('v', p_value, 'p', '[]'::jsonb)];
  v_size integer := 1;
  v_top jsonb;
  v_value jsonb;
  v_path jsonb;
  v_segments text[];
  v_child record;
BEGIN
  WHILE v_size > 0 LOOP
    v_top := v_stack[v_size];
    v_size := v_size - 1;
    v_value := v_top -> 'v';
    v_path := v_top -> 'p';
    IF jsonb_array_length(v_path) > 512 THEN
      v_segments := ARRAY(SELECT jsonb_array_elements_text(v_path));
      RETURN json_path_text(p_root, v_segments) || ': nested deeper than 512 levels';
    END IF;
    IF jsonb_typeof(v_value) = 'number' THEN
      IF canonical_number(v_value::text) IS NULL THEN
        v_segments := ARRAY(SELECT jsonb_array_elements_text(v_path));
        RETURN json_path_text(p_root, v_segments)
               || ': number out of the range of a double (JSON numbers are read as IEEE 754 doubles)';
      END IF;
    ELSIF jsonb_typeof(v_value) IN ('object', 'array') THEN
      -- Pushed last to first, so the first member is looked at first.
      FOR v_child IN
        SELECT e.n, jsonb_build_object('v', e.value, 'p', v_path || to_jsonb(
                 CASE WHEN e.key ~ '^[A-Za-z_$][A-Za-z0-9_$]*$' THEN '.' || e.key ELSE '.' || to_jsonb(e.key)::text END)) AS item
        FROM jsonb_each(CASE WHEN jsonb_typeof(v_value) = 'object' THEN v_value ELSE '{}' END)
             WITH ORDINALITY AS e (key, value, n)
        UNION ALL
        SELECT a.n, jsonb_build_object('v', a.value, 'p', v_path || to_jsonb('[' || (a.n - 1)::text || ']'))
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_value) = 'array' THEN v_value ELSE '[]' END)
             WITH ORDINALITY AS a (value, n)
        ORDER BY 1 DESC
      LOOP
        v_size := v_size + 1;
        v_stack[v_size] := v_child.item;
      END LOOP;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- A value the interface stores (input, signal payload, cancel body): its
-- canonical text, after the engine's checks in their order. p_root names it
-- in issue paths, p_what in the size error ("the input").
-- invalid_input (IP002) for SQL NULL or a value canonical_json refuses;
-- payload_too_large (IP003) over p_max_bytes of canonical UTF-8, the bound
-- the engine applies (createEngine's maxPayloadBytes).
CREATE OR REPLACE FUNCTION checked_json(p_value jsonb, p_root text, p_what text, p_max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
  v_text text;
BEGIN
  IF p_max_bytes IS NULL OR p_max_bytes < 1 OR p_max_bytes > 1073741823 THEN
    PERFORM raise_error('IP010', 'invalid_option',
                        'max_payload_bytes must be an integer from 1 to 1073741823, got ' || coalesce(p_max_bytes::text, 'null'));
  END IF;
  IF p_value IS NULL THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: ' || p_root || ': SQL NULL is not a JSON value (pass ''null''::jsonb for JSON null)');
  END IF;
  v_text := canonical_json(p_value);
  IF v_text IS NULL THEN
    PERFORM raise_error('IP002', 'invalid_input', 'invalid input: ' || json_issue(p_value, p_root));
  END IF;
  IF octet_length(v_text) > p_max_bytes THEN
    PERFORM raise_error('IP003', 'payload_too_large',
                        p_what || ' is ' || octet_length(v_text)::text || ' bytes as canonical JSON, over the engine''s '
                        || 'maxPayloadBytes of ' || p_max_bytes::text || '; nothing was stored: keep large data elsewhere '
                        || 'and pass a reference, or raise maxPayloadBytes');
  END IF;
  RETURN v_text;
END
$$;

-- SHA-256 hex over a name, a NUL byte and a canonical text: the request
-- fingerprint (name = the workflow) and the signal's (name = 'signal:' and
-- the signal's name), as json/fingerprint.ts computes them.
CREATE OR REPLACE FUNCTION request_fingerprint(p_name text, p_canonical text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT encode(sha256(convert_to(p_name, 'UTF8') || '\x00'::bytea || convert_to(p_canonical, 'UTF8')), 'hex')
$$;

-- ---------------------------------------------------------------------------
-- The interface: enqueue, signal, inspect, cancel, list_runs
-- ---------------------------------------------------------------------------

-- engine.enqueue for a caller that knows the workflow by name: create the
-- run in the caller's transaction (it exists once that commits; workers are
-- told on commit), suspended and due at once, under the newest version a
-- worker registered. Same admission as the engine's (runtime/admission):
-- true when created; false when the key already names this request (same
-- workflow and fingerprint), in any state; a completed record past
-- retention and tombstone counts as absent and is rewritten. The input is
-- not checked against the workflow's schema here: the worker that takes
-- the run does, and parks the run when it fails.
-- Race closed: two transactions enqueueing one key. ON CONFLICT waits for
-- the other one's commit; the next round reads what it committed.
CREATE OR REPLACE FUNCTION enqueue(
  tenant_id text, key text, workflow text, input jsonb, max_payload_bytes integer DEFAULT 1048576
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_workflow text := $3;
  v_text text;
  v_fingerprint text;
  v_def workflow_versions;
  v_found record;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  v_text := checked_json($4, '$', 'the input', $5);
  PERFORM check_key(v_workflow, 'workflow name');
  SELECT * INTO v_def FROM workflow_versions w WHERE w.workflow = v_workflow ORDER BY w.version DESC LIMIT 1;
  IF NOT FOUND THEN
    PERFORM raise_error('IP009', 'workflow_definition',
                        'workflow ''' || v_workflow || ''' is not registered: enqueue creates runs of the workflows '
                        || 'that a worker (engine.startWorker) running them has registered in this database');
  END IF;
  v_fingerprint := request_fingerprint(v_workflow, v_text);
  FOR round IN 1..8 LOOP
    SELECT r.workflow, r.fingerprint, x.expired, r.outcome, r.completed_at, r.expires_at,
           CASE WHEN x.expired AND x.kept_until > clock_timestamp() THEN x.kept_until END AS tombstone_until
    INTO v_found
    FROM runs r
    CROSS JOIN LATERAL (
      SELECT r.status = 'completed' AND r.expires_at <= clock_timestamp() AS expired,
             r.expires_at + r.tombstone_ms * interval '1 millisecond' AS kept_until
    ) x
    WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
    IF NOT FOUND THEN
      SELECT tb.workflow, encode(tb.fingerprint, 'hex') AS fingerprint, true AS expired, tb.outcome,
             tb.completed_at, tb.expired_at AS expires_at, tb.kept_until AS tombstone_until
      INTO v_found
      FROM tombstones tb
      WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
    END IF;
    IF NOT FOUND THEN
      INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                        input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                        tombstone_ms, wake_at, durable, workflow_version)
      VALUES (v_tenant_id, v_key, new_id(), v_workflow, v_def.definition, v_def.definition_hash, v_fingerprint,
              v_text::json, NULL, 'suspended', NULL, NULL, 0, v_def.retention_ms,
              v_def.tombstone_ms, clock_timestamp(), true, v_def.version)
      ON CONFLICT (tenant_id, key) DO NOTHING;
      IF FOUND THEN
        PERFORM pg_notify('idempo_due', v_workflow);
        RETURN true;
      END IF;
      CONTINUE;
    END IF;
    IF v_found.expired AND v_found.tombstone_until IS NULL THEN
      -- Past retention and tombstone the key counts as absent: the record becomes the new run.
      UPDATE runs
      SET run_id = new_id(), workflow = v_workflow, definition = v_def.definition,
          definition_hash = v_def.definition_hash, workflow_version = v_def.version,
          fingerprint = v_fingerprint, input = v_text::json, parsed_input_hash = NULL,
          status = 'suspended', owner_token = NULL, locked_until = NULL, attempt = 0,
          wake_at = clock_timestamp(), durable = true,
          attempt_floor = 0, outbox_round = 0, trace_parent = NULL, parked_reason = NULL, parked_at = NULL,
          wait_kind = NULL, wait_name = NULL, wait_until = NULL, recovery_point = NULL, state = '{}',
          retention_ms = v_def.retention_ms, tombstone_ms = v_def.tombstone_ms, outcome = NULL,
          response_status = NULL, response_body = NULL, expires_at = NULL, created_at = now(), updated_at = now(),
          completed_at = NULL
      WHERE tenant_id = v_tenant_id AND key = v_key
        AND status = 'completed' AND expires_at + tombstone_ms * interval '1 millisecond' <= clock_timestamp();
      IF FOUND THEN
        DELETE FROM run_history h WHERE h.tenant_id = v_tenant_id AND h.key = v_key;
        DELETE FROM signals s WHERE s.tenant_id = v_tenant_id AND s.key = v_key;
        PERFORM pg_notify('idempo_due', v_workflow);
        RETURN true;
      END IF;
      CONTINUE;
    END IF;
    IF v_found.workflow <> v_workflow THEN
      PERFORM raise_error('IP004', 'key_mismatch',
                          key_name(v_tenant_id, v_key) || ' was first used with workflow ''' || v_found.workflow
                          || ''', not ''' || v_workflow || '''; use a new key for a different request');
    END IF;
    IF v_found.fingerprint <> v_fingerprint THEN
      PERFORM raise_error('IP004', 'key_mismatch',
                          key_name(v_tenant_id, v_key) || ' was first used with a different request payload; '
                          || 'use a new key for a different request');
    END IF;
    IF v_found.tombstone_until IS NOT NULL THEN
      PERFORM raise_error('IP005', 'key_expired',
                          key_name(v_tenant_id, v_key) || ' named a request that completed (' || v_found.outcome
                          || ') at ' || iso_time(v_found.completed_at) || '; its stored response expired at '
                          || iso_time(v_found.expires_at) || ', so it is not run again: use a new key for a new request');
    END IF;
    RETURN false;
  END LOOP;
  PERFORM raise_error('IP006', 'key_in_progress',
                      key_name(v_tenant_id, v_key) || ' is being processed by another attempt; retry in 0 ms');
  RETURN NULL;
END
$$;

-- engine.signal without the schema check (SQL cannot know the wait's
-- schema): keep the signal for the run's `.waitFor(name)` and make the run
-- due when it is suspended there. A run that cannot use a payload discards
-- it (0012), records that in its history and waits for another. The
-- answers and refusals are the engine's (runtime/signal-delivery): a
-- repeat of the delivered signal (name and canonical payload) is a
-- duplicate, on a completed run too; a tombstoned run acknowledges any
-- signal (expired); another payload under a delivered name is key_mismatch.
-- Race closed: the same webhook twice at once, and the lost wake-up. Both
-- the signal and the run's wait lock the run's row first (held until the
-- caller's transaction ends), so the second one sees the first one's write.
CREATE OR REPLACE FUNCTION signal(
  tenant_id text, key text, name text, payload jsonb, max_payload_bytes integer DEFAULT 1048576
) RETURNS TABLE (duplicate boolean, woke boolean, expired boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_name text := $3;
  v_text text;
  v_fingerprint text;
  v_run record;
  v_existing text;
  v_waits text;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  PERFORM check_key(v_name, 'signal name');
  v_text := checked_json($4, 'payload', 'the payload of signal ''' || v_name || '''', $5);
  v_fingerprint := request_fingerprint('signal:' || v_name, v_text);
  SELECT r.run_id, r.workflow, r.status, r.definition,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()
          AND NOT r.expires_at + r.tombstone_ms * interval '1 millisecond' <= clock_timestamp()) AS tombstoned
  INTO v_run
  FROM runs r WHERE r.tenant_id = v_tenant_id AND r.key = v_key
  FOR UPDATE;
  IF NOT FOUND THEN
    PERFORM 1 FROM tombstones tb
    WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT false, false, true;
      RETURN;
    END IF;
    PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
  END IF;
  IF v_run.tombstoned THEN
    -- The run ended and only its tombstone counts: acknowledged, nothing changes.
    RETURN QUERY SELECT false, false, true;
    RETURN;
  END IF;
  IF v_run.expired THEN
    PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
  END IF;
  IF NOT (v_run.definition::jsonb ? ('wait:' || v_name)) THEN
    SELECT string_agg(substr(e.item, 6), ', ' ORDER BY e.n) INTO v_waits
    FROM json_array_elements_text(v_run.definition) WITH ORDINALITY AS e (item, n)
    WHERE e.item LIKE 'wait:%';
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: name: workflow ''' || v_run.workflow || ''' waits for no signal ''' || v_name
                        || ''' (it waits for: ' || coalesce(v_waits, 'none') || ')');
  END IF;
  SELECT s.fingerprint INTO v_existing
  FROM signals s
  WHERE s.tenant_id = v_tenant_id AND s.key = v_key AND s.run_id = v_run.run_id AND s.name = v_name;
  IF FOUND THEN
    IF v_existing = 'timed_out' THEN
      PERFORM raise_error('IP008', 'run_state',
                          key_name(v_tenant_id, v_key) || ': timed out waiting for signal ''' || v_name
                          || ''' before it arrived; the run went on without it (onTimeout or a stored 408), '
                          || 'so the signal changes nothing');
    END IF;
    IF v_existing = v_fingerprint THEN
      RETURN QUERY SELECT true, false, false;
      RETURN;
    END IF;
    PERFORM raise_error('IP004', 'key_mismatch',
                        key_name(v_tenant_id, v_key) || ' was first used with a different payload for signal '''
                        || v_name || '''; use a new key for a different request');
  END IF;
  IF v_run.status = 'completed' THEN
    PERFORM raise_error('IP008', 'run_state',
                        key_name(v_tenant_id, v_key) || ': is completed: signal ''' || v_name
                        || ''' arrived after the run finished and changes nothing (its stored response is replayed)');
  END IF;
  INSERT INTO signals (tenant_id, key, run_id, name, payload, fingerprint)
  VALUES (v_tenant_id, v_key, v_run.run_id, v_name, v_text::json, v_fingerprint);
  UPDATE runs
  SET wake_at = LEAST(coalesce(wake_at, clock_timestamp()), clock_timestamp()), updated_at = clock_timestamp()
  WHERE tenant_id = v_tenant_id AND key = v_key AND run_id = v_run.run_id
    AND status = 'suspended' AND wait_kind = 'signal' AND wait_name = v_name;
  IF FOUND THEN
    PERFORM pg_notify('idempo_due', v_run.workflow);
    RETURN QUERY SELECT false, true, false;
  ELSE
    RETURN QUERY SELECT false, false, false;
  END IF;
END
$$;

-- engine.inspect: the key's record with its history, oldest entry first;
-- the tombstone (status 'expired') when only that is left; no row when
-- the key is absent. A completed record past retention is shown as it is
-- (expired true) until the sweeper turns it into its tombstone.
CREATE OR REPLACE FUNCTION inspect(tenant_id text, key text) RETURNS SETOF run_record
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  RETURN QUERY
  SELECT r.tenant_id, r.key, r.run_id, r.workflow, r.workflow_version, r.status,
         CASE WHEN r.status = 'completed' THEN r.outcome END,
         CASE WHEN r.status = 'completed' THEN r.response_status END,
         CASE WHEN r.status = 'completed' THEN r.response_body END,
         r.parked_reason,
         CASE WHEN r.status = 'suspended' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_kind END,
         CASE WHEN r.status = 'suspended' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_name END,
         CASE WHEN r.status = 'suspended' THEN r.wake_at END,
         r.recovery_point, r.attempt,
         CASE WHEN r.status = 'in_flight'
              THEN ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000)::float8 END,
         r.input, r.state, r.created_at, r.updated_at, r.completed_at, r.expires_at,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()),
         CASE WHEN r.status = 'completed' AND r.tombstone_ms > 0
              THEN r.expires_at + r.tombstone_ms * interval '1 millisecond' END,
         coalesce((
           SELECT json_agg(json_build_object('kind', h.kind, 'name', h.name, 'attempt', h.attempt,
                                             'derived_key', h.derived_key, 'outcome', h.outcome, 'error', h.error,
                                             'started_at', h.started_at, 'finished_at', h.finished_at,
                                             'tries', h.tries)
                           ORDER BY h.started_at, h.entry_id)
           FROM run_history h
           WHERE h.tenant_id = r.tenant_id AND h.key = r.key AND h.run_id = r.run_id
         ), '[]'::json)
  FROM runs r
  WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT tb.tenant_id, v_key, NULL::text, tb.workflow, NULL::integer, 'expired'::text, tb.outcome,
         NULL::integer, NULL::json, NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::text, NULL::integer,
         NULL::float8, NULL::json, NULL::json, NULL::timestamptz, NULL::timestamptz, tb.completed_at, tb.expired_at,
         true, tb.kept_until, NULL::json
  FROM tombstones tb
  WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
END
$$;

-- engine.cancel: finish a run that is in flight, suspended or parked with a
-- stored answer (outcome 'canceled'; default 409 with the problem body the
-- engine stores, code run_canceled), through mark_completed as every
-- completion; a live owner's next write fails. Returns the record as
-- inspect shows it. run_state (IP008) for a completed run, run_not_found
-- (IP007) for an absent key.
CREATE OR REPLACE FUNCTION cancel(
  tenant_id text, key text, status integer DEFAULT 409, body jsonb DEFAULT NULL,
  max_payload_bytes integer DEFAULT 1048576
) RETURNS SETOF run_record LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_status integer := $3;
  v_text text;
  v_found record;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  IF v_status IS NULL OR v_status < 100 OR v_status > 599 THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: status: must be an integer 100-599, got ' || coalesce(v_status::text, 'null'));
  END IF;
  v_text := checked_json(coalesce($4, jsonb_build_object(
              'type', 'about:blank', 'title', 'Canceled', 'status', v_status, 'code', 'run_canceled',
              'detail', 'an operator canceled this request; retrying with the same key returns this answer')),
            'body', 'the body of cancel', $5);
  PERFORM 1 FROM mark_completed(v_tenant_id, v_key, NULL, true, 'canceled', v_status, v_text::json, NULL, NULL, false);
  IF NOT FOUND THEN
    SELECT r.status, r.outcome INTO v_found FROM runs r WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
    IF NOT FOUND THEN
      PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
    END IF;
    PERFORM raise_error('IP008', 'run_state',
                        key_name(v_tenant_id, v_key) || ': is already completed (outcome '
                        || coalesce(v_found.outcome, 'unknown')
                        || '): there is nothing to cancel, its stored response is replayed');
  END IF;
  RETURN QUERY SELECT * FROM inspect(v_tenant_id, v_key);
END
$$;

-- engine.listKeys: one page of records, newest first, each with the cursor
-- that continues after it (the cursors of listKeys, in either direction).
-- stuck: in flight with an expired lease (compared with now(), so that
-- runs_in_flight_locked_until serves it); status 'parked' reads runs_parked.
CREATE OR REPLACE FUNCTION list_runs(
  tenant_id text DEFAULT NULL, workflow text DEFAULT NULL, status text DEFAULT NULL, stuck boolean DEFAULT false,
  page_size integer DEFAULT 50, cursor text DEFAULT NULL
) RETURNS SETOF run_summary LANGUAGE plpgsql STABLE SET search_path FROM CURRENT SET datestyle = 'ISO, MDY' AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_workflow text := $2;
  v_status text := $3;
  v_stuck boolean := coalesce($4, false);
  v_limit integer := $5;
  v_after jsonb;
BEGIN
  IF v_tenant_id IS NOT NULL THEN
    PERFORM check_key(v_tenant_id, 'tenant id');
  END IF;
  IF v_workflow IS NOT NULL THEN
    PERFORM check_key(v_workflow, 'workflow name');
  END IF;
  IF v_status IS NOT NULL AND v_status NOT IN ('in_flight', 'completed', 'parked', 'suspended') THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: status: must be ''in_flight'', ''completed'', ''parked'' or ''suspended''');
  END IF;
  IF v_limit IS NULL OR v_limit < 1 OR v_limit > 1000 THEN
    PERFORM raise_error('IP002', 'invalid_input', 'invalid input: page_size: must be an integer from 1 to 1000');
  END IF;
  IF $6 IS NOT NULL THEN
    BEGIN
      v_after := convert_from(decode(translate($6, '-_', '+/') || repeat('=', (4 - length($6) % 4) % 4), 'base64'),
                              'UTF8')::jsonb;
    EXCEPTION WHEN OTHERS THEN
      v_after := NULL;
    END;
    IF v_after IS NULL OR jsonb_typeof(v_after) <> 'array' OR jsonb_array_length(v_after) <> 3
       OR jsonb_typeof(v_after -> 0) <> 'string' OR jsonb_typeof(v_after -> 1) <> 'string'
       OR jsonb_typeof(v_after -> 2) <> 'string'
       OR (v_after ->> 0) !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?[+-][0-9]{2}(:[0-9]{2}){0,2}$' THEN
      PERFORM raise_error('IP002', 'invalid_input', 'invalid input: cursor: not a cursor returned by list_runs or listKeys');
    END IF;
  END IF;
  -- Only the filters given, as the engine's listKeys writes them: each plan sees its own conditions.
  RETURN QUERY EXECUTE
  'SELECT r.tenant_id, r.key, r.workflow, r.workflow_version, r.status, r.parked_reason,
          CASE WHEN r.status = ''suspended'' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_kind END,
          CASE WHEN r.status = ''suspended'' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_name END,
          CASE WHEN r.status = ''suspended'' THEN r.wake_at END,
          r.recovery_point, r.attempt,
          CASE WHEN r.status = ''in_flight''
               THEN ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000)::float8 END,
          CASE WHEN r.status = ''completed'' THEN r.outcome END,
          CASE WHEN r.status = ''completed'' THEN r.response_status END,
          r.created_at, r.updated_at,
          rtrim(translate(encode(convert_to(canonical_json_at(jsonb_build_array(r.created_at::text, r.tenant_id, r.key), 0),
                                            ''UTF8''), ''base64''), E''+/\n'', ''-_''), ''='')
   FROM runs r WHERE true'
  || CASE WHEN v_tenant_id IS NULL THEN '' ELSE ' AND r.tenant_id = $1' END
  || CASE WHEN v_workflow IS NULL THEN '' ELSE ' AND r.workflow = $2' END
  || CASE WHEN v_status IS NULL THEN '' ELSE ' AND r.status = $3' END
  -- now(), not clock_timestamp(): an index condition on runs_in_flight_locked_until.
  || CASE WHEN v_stuck THEN ' AND r.status = ''in_flight'' AND r.locked_until <= now()' ELSE '' END
  || CASE WHEN v_after IS NULL THEN ''
          ELSE ' AND (r.created_at, r.tenant_id, r.key) < (($4 ->> 0)::timestamptz, $4 ->> 1, $4 ->> 2)' END
  || ' ORDER BY r.created_at DESC, r.tenant_id DESC, r.key DESC LIMIT $5'
  USING v_tenant_id, v_workflow, v_status, v_after, v_limit;
END
$$;
