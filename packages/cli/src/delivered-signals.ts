/**
 * Whether the signal a suspended run waits for has been delivered. The
 * record says only that the run is due; a delivered signal and a passed
 * timeout look the same there, and a retry does different things for each
 * (merge the payload, or let `onTimeout` decide), so the CLI and the
 * console read the signals table (one statement per page of records).
 */
import type { RunRecord } from "@idempo/core";
import type { Kysely } from "kysely";
import { sql } from "kysely";
import type { SuspensionFacts } from "./format/diagnosis.js";

const id = (r: { tenantId: string; key: string }) => `${r.tenantId}\u0000${r.key}`;

/**
 * The facts of each record suspended on a signal wait, by tenant and key
 * (look up with {@link factsOf}); records not waiting for a signal get none.
 */
export async function deliveredSignals(
  // biome-ignore lint/suspicious/noExplicitAny: idempo's tables are read with plain SQL only
  db: Kysely<any>,
  schema: string,
  records: readonly RunRecord[],
): Promise<ReadonlyMap<string, SuspensionFacts>> {
  const waiting = records.filter((r) => r.status === "suspended" && r.waitingFor?.kind === "signal");
  const facts = new Map<string, SuspensionFacts>();
  if (waiting.length === 0) return facts;
  const { rows } = await sql<{ tenant_id: string; key: string }>`
    SELECT s.tenant_id, s.key
    FROM ${sql.id(schema, "signals")} s
    JOIN unnest(${waiting.map((r) => r.tenantId)}::text[], ${waiting.map((r) => r.key)}::text[],
                ${waiting.map((r) => r.runId)}::text[], ${waiting.map((r) => r.waitingFor?.name ?? "")}::text[])
      AS w(tenant_id, key, run_id, name)
      ON s.tenant_id = w.tenant_id AND s.key = w.key AND s.run_id = w.run_id AND s.name = w.name
  `.execute(db);
  const delivered = new Set(rows.map((r) => id({ tenantId: r.tenant_id, key: r.key })));
  for (const r of waiting) facts.set(id(r), { signalDelivered: delivered.has(id(r)) });
  return facts;
}

/** The facts of one record from a {@link deliveredSignals} map (none when it waits for no signal). */
export function factsOf(map: ReadonlyMap<string, SuspensionFacts>, record: RunRecord): SuspensionFacts {
  return map.get(id(record)) ?? {};
}
