/**
 * What minting one id costs on this machine. The engine mints ULIDs with
 * the `ulid` package's default generator, which draws each of the 16 random
 * characters from a separate WebCrypto call; the same ULID from a pooled
 * random buffer is shown for comparison.
 */
import { randomFillSync } from "node:crypto";
import { performance } from "node:perf_hooks";
import { ulid } from "ulid";

const pool = new Uint8Array(4096);
let at = pool.length;
/** A PRNG over a refilled buffer of crypto-random bytes: one system call per 4 KiB. */
const pooledPrng = (): number => {
  if (at === pool.length) {
    randomFillSync(pool);
    at = 0;
  }
  return (pool[at++] as number) / 256;
};

function microseconds(fn: () => unknown, n: number): number {
  for (let i = 0; i < 1000; i++) fn();
  const start = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ((performance.now() - start) * 1000) / n;
}

export interface IdCost {
  readonly defaultUs: number;
  readonly pooledUs: number;
}

export function measureIdCost(): IdCost {
  return {
    defaultUs: microseconds(() => ulid(), 20_000),
    pooledUs: microseconds(() => ulid(undefined, pooledPrng), 20_000),
  };
}
