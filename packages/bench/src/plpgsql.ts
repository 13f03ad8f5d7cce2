/**
 * One way to run the engine's fixed statements with cached plans on every
 * driver: each statement as a PL/pgSQL function (PL/pgSQL keeps the plans of
 * its statements per session, on PostgreSQL and on PGlite alike). The bench
 * writes the functions itself, in a scratch schema, from the recorded
 * statements, so they are the engine's SQL exactly; a call is then a short
 * unnamed `SELECT * FROM fn($1, ...)` whose own parse and plan are cheap.
 */
import type { Replica } from "./replica.js";
import { isEngineStatement } from "./replica.js";

/** A session that runs one statement at a time (a pg client, or PGlite). */
export interface Session {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

const FUNCTION_SCHEMA = "bench_fn";

/** A call of one of idempo's statement functions, as the engine sends its hot-path statements. */
const isFunctionCall = (text: string): boolean =>
  /^\s*(?:\/\*.*?\*\/\s*)?SELECT (?:\* FROM )?"idempo"\."[a-z_]+"\(/s.test(text);

/** Statements that hand rows back are looped over; the rest just run. */
const returnsRows = (text: string): boolean => /^\s*(with|select)\b/i.test(text) || /\breturning\b/i.test(text);

/**
 * Create one function per distinct engine statement of `replicas` on
 * `session` and return statement name -> qualified function name. The
 * parameter types are the ones the server infers for the statement
 * (PREPARE, then pg_prepared_statements), as it does for the engine's own
 * unnamed statements.
 */
export async function createStatementFunctions(
  session: Session,
  replicas: readonly Replica[],
): Promise<Map<string, string>> {
  await session.query(`CREATE SCHEMA IF NOT EXISTS ${FUNCTION_SCHEMA}`);
  const made = new Map<string, string>();
  for (const st of replicas.flatMap((r) => r.statements)) {
    if (st.kind !== "query" || !isEngineStatement(st.text) || made.has(st.name)) continue;
    // The engine's hot-path statements already are calls of its own functions (migration 0008).
    if (isFunctionCall(st.text)) continue;
    await session.query(`PREPARE bench_probe AS ${st.text}`);
    const { rows } = await session.query(
      "SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = 'bench_probe'",
    );
    await session.query("DEALLOCATE bench_probe");
    const types = (rows[0] as { types: string[] | string } | undefined)?.types ?? [];
    const list = Array.isArray(types) ? types : parsePgArray(types);
    const fn = `${FUNCTION_SCHEMA}.s_${st.name.replace(/^bench_/, "")}`;
    // The loop variable's name cannot collide with a table alias in the statement.
    const body = returnsRows(st.text)
      ? `DECLARE bench_row__ record; BEGIN FOR bench_row__ IN ${st.text} LOOP RETURN NEXT to_json(bench_row__); END LOOP; END`
      : `BEGIN ${st.text}; END`;
    await session.query(
      `CREATE OR REPLACE FUNCTION ${fn}(${list.join(", ")}) RETURNS SETOF json LANGUAGE plpgsql AS $fn$ ${body} $fn$`,
    );
    made.set(st.name, fn);
  }
  return made;
}

/** `{text,"timestamp with time zone"}` -> its elements (PGlite may hand text[] back as text). */
function parsePgArray(text: string): string[] {
  const inner = text.replace(/^\{|\}$/g, "");
  if (inner === "") return [];
  return [...inner.matchAll(/"((?:[^"\\]|\\.)*)"|([^,]+)/g)].map((m) => (m[1] ?? m[2] ?? "").trim());
}
