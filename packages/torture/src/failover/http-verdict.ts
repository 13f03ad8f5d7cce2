/**
 * The check of the HTTP service's charges, on the new primary itself:
 * every charge whose caller got an answer is stored with that answer; the
 * charge rows are exactly the ones the answers name (a `record_charge`
 * committed twice leaves a row nobody was told of); the card network made
 * one authorization per charge (it deduplicates on the step's derived key,
 * so a second authorization means a second key); a final replay of every
 * key equals the first answer; no run is left in flight.
 */
import { isDeepStrictEqual } from "node:util";
import pg from "pg";
import type { CallerTally, Charge } from "./http-service.ts";
import { postCharge } from "./http-service.ts";

/** What the check found. */
export interface HttpVerdict {
  readonly intents: number;
  readonly answered: number;
  readonly declined: number;
  readonly tally: CallerTally;
  /** Authorizations the card network made, and calls it got (repeats of a derived key included). */
  readonly authorizations: number;
  readonly networkCalls: number;
  /** A charge row or an authorization beyond one per intent. Must be 0. */
  readonly duplicateEffects: number;
  /** An intent never answered, or answered and missing (or different) on the new primary. Must be 0. */
  readonly lostIntents: number;
  /** A replay that differs, a run left in flight, an unexpected answer, a service process that exited. Must be 0. */
  readonly otherViolations: number;
  readonly problems: readonly string[];
}

interface RunRow {
  tenant_id: string;
  key: string;
  status: string;
  response_status: number | null;
  body: string | null;
}

interface ChargeRow {
  id: string;
  tenant_id: string;
  status: string;
  network_ref: string | null;
}

/**
 * Check `charges` against the service's database at `leaderUrl` and the
 * service at `serviceUrl`; `exits` counts the service process's exits
 * while it should have run.
 */
export async function judgeCharges(
  charges: readonly Charge[],
  tally: CallerTally,
  at: { readonly leaderUrl: string; readonly serviceUrl: string; readonly exits: number },
): Promise<HttpVerdict> {
  const problems: string[] = [...tally.unexpected];
  let duplicateEffects = 0;
  let lostIntents = 0;
  let otherViolations = tally.unexpected.length;
  if (at.exits > 0) {
    otherViolations++;
    problems.push(`the HTTP service's process exited ${at.exits} times: it had to be restarted`);
  }

  const client = new pg.Client({ connectionString: at.leaderUrl });
  await client.connect();
  let runs: RunRow[];
  let rows: ChargeRow[];
  try {
    runs = (
      await client.query<RunRow>(
        "SELECT tenant_id, key, status, response_status, response_body::text AS body FROM idempo.runs",
      )
    ).rows;
    rows = (await client.query<ChargeRow>("SELECT id, tenant_id, status, network_ref FROM charges")).rows;
  } finally {
    await client.end();
  }
  const runBy = new Map(runs.map((r) => [`${r.tenant_id}/${r.key}`, r]));
  const chargeBy = new Map(rows.map((r) => [r.id, r]));
  const named = new Set<string>();

  for (const c of charges) {
    const where = `${c.tenant}/${c.key}`;
    if (!c.answer) {
      lostIntents++;
      problems.push(`${where}: never answered`);
      continue;
    }
    const run = runBy.get(where);
    const body = c.answer.body as { id?: string; network_ref?: string; error?: { charge?: string } };
    const chargeId = c.answer.status === 201 ? body.id : body.error?.charge;
    const row = chargeId === undefined ? undefined : chargeBy.get(chargeId);
    if (chargeId !== undefined) named.add(chargeId);
    if (run?.status !== "completed" || !row) {
      lostIntents++;
      problems.push(
        `${where}: answered ${c.answer.status}, but ${!row ? "its charge" : "its completed run"} is missing`,
      );
      continue;
    }
    const stored = run.body === null ? null : (JSON.parse(run.body) as unknown);
    if (run.response_status !== c.answer.status || !isDeepStrictEqual(stored, c.answer.body)) {
      otherViolations++;
      problems.push(`${where}: answered ${c.answer.status}, stored ${run.response_status} ${run.body}`);
    }
    const expected = c.answer.status === 201 ? "succeeded" : "pending";
    if (row.status !== expected || (c.answer.status === 201 && row.network_ref !== body.network_ref)) {
      otherViolations++;
      problems.push(`${where}: charge ${row.id} is ${row.status} (${row.network_ref}), not as answered`);
    }
  }
  for (const r of rows) {
    if (named.has(r.id)) continue;
    duplicateEffects++;
    problems.push(`charge ${r.id} (${r.tenant_id}) exists, and no answer names it`);
  }
  const unfinished = runs.filter((r) => r.status !== "completed");
  if (unfinished.length > 0) {
    otherViolations += unfinished.length;
    problems.push(`${unfinished.length} runs not completed, e.g. ${unfinished[0]?.tenant_id}/${unfinished[0]?.key}`);
  }

  // A final replay of every key: the same answer, marked as a replay.
  for (const c of charges) {
    if (!c.answer) continue;
    const res = await postCharge(at.serviceUrl, c);
    if (
      "failed" in res ||
      !res.replayed ||
      res.status !== c.answer.status ||
      !isDeepStrictEqual(res.body, c.answer.body)
    ) {
      otherViolations++;
      problems.push(`${c.tenant}/${c.key}: the final replay differs: ${JSON.stringify(res)}`);
    }
  }

  // The card network lives in the service's process: one authorization per derived key.
  const stats = await fetch(`${at.serviceUrl}/v1/stats`, { headers: { authorization: "Bearer sk_test_acme" } });
  const network = ((await stats.json()) as { card_network: { calls: number; authorizations: number } }).card_network;
  if (network.authorizations > charges.length) {
    duplicateEffects += network.authorizations - charges.length;
    problems.push(`the card network made ${network.authorizations} authorizations for ${charges.length} charges`);
  } else if (network.authorizations < charges.length) {
    lostIntents += charges.length - network.authorizations;
    problems.push(`the card network made ${network.authorizations} authorizations for ${charges.length} charges`);
  }

  return {
    intents: charges.length,
    answered: charges.filter((c) => c.answer).length,
    declined: charges.filter((c) => c.answer?.status === 402).length,
    tally,
    authorizations: network.authorizations,
    networkCalls: network.calls,
    duplicateEffects,
    lostIntents,
    otherViolations,
    problems,
  };
}
