-- Why: canonical_json spelled some numbers of 17 significant digits other
-- than JavaScript does, so a request fingerprinted in SQL and retried
-- through TypeScript (or the other way) read as a different request.
-- json_number_text took the server's shortest float8 output as the
-- digits ECMAScript's Number::toString writes. That output never takes a
-- bound of the double's rounding interval, while ECMAScript takes one when
-- it reads back as the same double: 18490768613004190 lies halfway between
-- two doubles and reads as the even one, 18490768613004192, so JavaScript
-- writes 18490768613004190 and the server wrote 18490768613004192.
--
-- Now json_number_text tries the digits one shorter, rounded down and up,
-- while one of them reads back as the double. Only numbers longer than 16
-- characters (or below 1e-6) reach the function; the common spellings are
-- unchanged and cost the same. No table changes.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- A number as ECMAScript's Number::toString spells the double nearest to
-- it (what JSON.stringify and so JCS write), or NULL when no finite double
-- holds it (beyond about 1.8e308, or so small that it reads as 0). The
-- server's float8 output with extra_float_digits >= 1 gives the shortest
-- digits strictly inside the double's rounding interval; ECMAScript also
-- takes a bound of the interval when it reads back as the same double (a
-- tie that rounds to the even neighbour), so the digits one shorter are
-- tried, rounded down and up, while one of them reads back as the double,
-- the nearer one winning. Then only where the digits go (fixed or exponent
-- form) is rewritten.
-- True when p_text reads as the double p_double; false when it reads as
-- none (beyond the double range either way).
CREATE OR REPLACE FUNCTION json_number_reads_as(p_text text, p_double float8) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  RETURN p_text::float8 = p_double;
EXCEPTION WHEN numeric_value_out_of_range THEN
  RETURN false;
END
$$;

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
  v_down text;
  v_up text;
  v_down_ok boolean;
  v_up_ok boolean;
  v_pick text;
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
    v_double := -v_double;
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
  -- A bound that reads back as the double: <digits>e<n> is 0.<digits> * 10^v_point
  -- when n = v_point - (the digits' count).
  WHILE v_len > 1 LOOP
    v_down := left(v_digits, v_len - 1);
    v_up := (v_down::numeric + 1)::text;
    IF v_point BETWEEN -300 AND 300 THEN
      v_down_ok := (v_down || 'e' || (v_point - v_len + 1))::float8 = v_double;
      v_up_ok := (v_up || 'e' || (v_point - v_len + 1))::float8 = v_double;
    ELSE
      v_down_ok := json_number_reads_as(v_down || 'e' || (v_point - v_len + 1), v_double);
      v_up_ok := json_number_reads_as(v_up || 'e' || (v_point - v_len + 1), v_double);
    END IF;
    EXIT WHEN NOT (v_down_ok OR v_up_ok);
    IF v_down_ok AND v_up_ok THEN
      v_pick := CASE WHEN v_digits::numeric - (v_down || '0')::numeric <= (v_up || '0')::numeric - v_digits::numeric
                     THEN v_down ELSE v_up END;
    ELSE
      v_pick := CASE WHEN v_down_ok THEN v_down ELSE v_up END;
    END IF;
    v_point := v_point + length(v_pick) - (v_len - 1);
    v_digits := rtrim(v_pick, '0');
    v_len := length(v_digits);
  END LOOP;
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
