/**
 * What the client spends on a 409's error object: an
 * `IdempotencyKeyInProgressError` made and caught six awaits away, as
 * `runOnce` raises it to its caller, against an `IdempoError` with the same
 * code and message (a stack taken where it is made, as every error's is by
 * default), and the same 409 whose stack is then read once (what a caller
 * that logs it pays). CPU time per error, over a fixed number of errors per
 * round, rounds alternating which goes first; the median over rounds.
 */
import { IdempoError, IdempotencyKeyInProgressError } from "@idempo/core";
import { median } from "./measure.js";

const ERRORS_PER_ROUND = 20_000;
const ROUNDS = 7;

type Make = (i: number) => Error;

const lazy: Make = (i) => new IdempotencyKeyInProgressError("bench", `bk-${i}`, 1000);
const eager: Make = (i) =>
  new IdempoError(
    "key_in_progress",
    409,
    `idempotency key 'bk-${i}' (tenant 'bench') is being processed by another attempt; retry in 1000 ms`,
  );

/** Raised at the bottom of a chain of awaits, like the engine's admission → claim round → decision. */
async function raise(make: Make, i: number, depth: number): Promise<never> {
  if (depth === 0) {
    await null;
    throw make(i);
  }
  return await raise(make, i, depth - 1);
}

/** CPU µs per error made, raised through 6 awaits and caught; `read` also reads its stack. */
async function perError(make: Make, read: boolean): Promise<number> {
  const start = process.cpuUsage();
  let length = 0;
  for (let i = 0; i < ERRORS_PER_ROUND; i++) {
    try {
      await raise(make, i, 6);
    } catch (error) {
      if (read) length += String((error as Error).stack).length;
    }
  }
  const used = process.cpuUsage(start);
  if (read && length === 0) throw new Error("no stack was read");
  return (used.user + used.system) / ERRORS_PER_ROUND;
}

export interface ErrorCost {
  /** The 409 as the engine makes it, stack not read. */
  readonly lazyUs: number;
  /** An error with the same fields whose stack is taken where it is made. */
  readonly eagerUs: number;
  /** The 409 with its stack read once. */
  readonly lazyReadUs: number;
}

export async function measureErrorCost(): Promise<ErrorCost> {
  const sides: [Make, boolean][] = [
    [lazy, false],
    [eager, false],
    [lazy, true],
  ];
  for (const [make, read] of sides) await perError(make, read);
  const per: number[][] = sides.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (let s = 0; s < sides.length; s++) {
      const index = (s + round) % sides.length;
      const [make, read] = sides[index] as [Make, boolean];
      per[index]?.push(await perError(make, read));
    }
  }
  const [lazyUs, eagerUs, lazyReadUs] = per.map(median) as [number, number, number];
  return { lazyUs, eagerUs, lazyReadUs };
}
