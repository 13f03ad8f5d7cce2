/** Printing the story: headings, indented lines, responses and `engine.inspect` records. */
import type { RunRecord, RunResult, TombstoneRecord } from "@idempo/core";

/** Print the heading of one numbered part of the story. */
export function heading(n: number, text: string): void {
  console.log(`\n${n}. ${text}`);
}

/** Print one indented line of the story. */
export function say(text: string): void {
  console.log(`   ${text}`);
}

/** Print a `runOnce` result as a client would see it. */
export function showResult(res: RunResult<unknown>): void {
  say(`-> ${res.status} ${JSON.stringify(res.body)}, replayed: ${res.replayed}`);
}

/** Print what `engine.inspect` reports: status, recovery point, attempt, lease and the history timeline. */
export function showRecord(rec: RunRecord | TombstoneRecord | null): void {
  if (!rec || rec.status === "expired") {
    say(`engine.inspect: ${rec ? "expired (tombstone)" : "no record"}`);
    return;
  }
  const lease = rec.leaseRemainingMs === null ? "" : `, lease ${Math.max(0, rec.leaseRemainingMs)} ms left`;
  say(
    `engine.inspect: ${rec.status}, recovery point '${rec.recoveryPoint ?? "(none)"}', attempt ${rec.attempt}${lease}`,
  );
  for (const h of rec.history ?? []) {
    const key = h.derivedKey ? `  key ${shortKey(h.derivedKey)}` : "";
    say(`  attempt ${h.attempt}  ${h.kind.padEnd(5)} ${h.name.padEnd(13)} ${h.outcome.padEnd(11)}${key}`.trimEnd());
  }
}

/** A derived key cut to a readable prefix. */
export function shortKey(key: string): string {
  return key.length > 18 ? `${key.slice(0, 17)}…` : key;
}
