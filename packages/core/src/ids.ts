/**
 * ULIDs for run ids, owner tokens, history entries and outbox messages.
 * ulid's default random source asks WebCrypto for each character (tens of
 * µs per id, most of a replay's CPU); this one draws the same
 * cryptographic randomness from a pooled buffer refilled in bulk.
 */
import { randomFillSync } from "node:crypto";
import { ulid } from "ulid";

const pool = new Uint32Array(1024);
let next = pool.length;

/** A uniform float in [0, 1) from the pooled CSPRNG output, as ulid's PRNG contract asks. */
function pooledRandom(): number {
  if (next >= pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return (pool[next++] as number) / 0x1_0000_0000;
}

/** A new ULID (26 Crockford base32 characters, time-ordered). */
export function newId(): string {
  return ulid(undefined, pooledRandom);
}
