/**
 * Calling the SQL interface (migration 0017) the way a program in another
 * language does: plain statements with JSON parameters, and the SQLSTATE
 * and message of what it raises.
 */
import { sql } from "kysely";
import type { TestDb } from "./db.ts";

/** `idempo.enqueue(...)`: true when created. */
export async function sqlEnqueue(
  db: TestDb,
  tenantId: string,
  key: string,
  workflow: string,
  input: unknown,
  maxPayloadBytes?: number,
): Promise<boolean> {
  const { rows } = await sql<{ created: boolean }>`
    SELECT idempo.enqueue(${tenantId}, ${key}, ${workflow}, ${JSON.stringify(input)}::jsonb,
                          ${maxPayloadBytes ?? 1_048_576}::integer) AS created`.execute(db);
  return rows[0]?.created as boolean;
}

/** `idempo.signal(...)`: its one row. */
export async function sqlSignal(
  db: TestDb,
  tenantId: string,
  key: string,
  name: string,
  payload: unknown,
  maxPayloadBytes?: number,
): Promise<{ duplicate: boolean; woke: boolean; expired: boolean }> {
  const { rows } = await sql<{ duplicate: boolean; woke: boolean; expired: boolean }>`
    SELECT * FROM idempo.signal(${tenantId}, ${key}, ${name}, ${JSON.stringify(payload)}::jsonb,
                                ${maxPayloadBytes ?? 1_048_576}::integer)`.execute(db);
  return rows[0] as { duplicate: boolean; woke: boolean; expired: boolean };
}

/** The row `idempo.inspect` returns, or undefined for an absent key. */
export async function sqlInspect(db: TestDb, tenantId: string, key: string): Promise<Record<string, unknown>> {
  const { rows } = await sql<Record<string, unknown>>`SELECT * FROM idempo.inspect(${tenantId}, ${key})`.execute(db);
  return rows[0] as Record<string, unknown>;
}

/** What a statement raised: its SQLSTATE and message; throws when it did not fail. */
export async function sqlError(statement: Promise<unknown>): Promise<{ sqlstate: string; message: string }> {
  try {
    await statement;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    return { sqlstate: e.code ?? "", message: e.message ?? "" };
  }
  throw new Error("the statement did not fail");
}

/** Rows of `idempo.workflow_versions` for a workflow, newest version first. */
export async function registeredVersions(db: TestDb, workflow: string): Promise<{ version: number }[]> {
  const { rows } = await sql<{ version: number }>`
    SELECT version FROM idempo.workflow_versions WHERE workflow = ${workflow} ORDER BY version DESC`.execute(db);
  return rows;
}
