import type { RunRecord } from "@idempo/core";

/** The call that delivers a signal to this run, with its tenant and key quoted as code. */
export function signalCall(record: RunRecord, name: string): string {
  const q = (s: string) => JSON.stringify(s);
  return `engine.signal(${q(record.tenantId)}, ${q(record.key)}, ${q(name)}, payload)`;
}
