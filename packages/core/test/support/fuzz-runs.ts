/**
 * What every fuzz test file shares: how many cases a property runs and how
 * long it may take, fresh tenants and keys, and errors described for a
 * failure message.
 */

export const RUNS = Number(process.env.IDEMPO_FUZZ_RUNS ?? 100);
/** Each property stops early rather than push the file past its budget on a slow machine. */
export const TIME_LIMIT_MS = 3_000;

let serial = 0;
/** A tenant (or key) no other call of this file uses. */
export const fresh = (what: string) => `${what}-${++serial}`;

export const describeError = (e: unknown) =>
  e instanceof Error
    ? `${e.constructor.name}(${(e as { code?: string }).code ?? "-"}): ${e.message.slice(0, 300)}`
    : String(e);
