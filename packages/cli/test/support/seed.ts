/**
 * A database seeded by real workflow runs: two tenants, a completed
 * checkout in each (same key), a checkout that crashed while charging, one
 * that crashed before recording its charge, and two whose process died
 * with their lease still running.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { useClonedDatabase } from "../../../testkit/src/index.ts";
import { checkout } from "../fixtures/checkout-workflow.ts";

/** A short lease for the runs meant to be stuck, a long one for those meant to look alive. */
const SHORT_LEASE_MS = 300;
const LONG_LEASE_MS = 600_000;

async function crashAt(
  engine: Engine,
  point: string,
  tenantId: string,
  key: string,
  amountCents: number,
): Promise<void> {
  setFaultHook(engine, (p) => {
    if (p === point) throw new CrashSignal(p);
  });
  try {
    await engine.runOnce(checkout, { tenantId, key, input: { amountCents } });
    throw new Error(`expected a crash at ${point}`);
  } catch (error) {
    if (!(error instanceof CrashSignal)) throw error;
  } finally {
    setFaultHook(engine, undefined);
  }
}

export interface SeededDatabase {
  readonly url: string;
  /** An engine on the database, for assertions. */
  readonly engine: Engine;
}

/** Give this test file its own migrated database, seeded as described above, named after `prefix` (one per file). */
export function useSeededDatabase(prefix: string): SeededDatabase {
  let engine: Engine | undefined;
  const clone = useClonedDatabase(prefix, {
    pool: 4,
    prepare: async (db) => {
      const normal = createEngine({ db });
      const short = createEngine({ db, leaseMs: SHORT_LEASE_MS });
      const long = createEngine({ db, leaseMs: LONG_LEASE_MS });
      engine = normal;
      // Oldest first, so "newest first" has a known order.
      await normal.runOnce(checkout, { tenantId: "acme", key: "order-1001", input: { amountCents: 1200 } });
      await normal.runOnce(checkout, { tenantId: "globex", key: "order-1001", input: { amountCents: 800 } });
      await crashAt(short, "called:step:charge", "acme", "order-1002", 4500);
      await crashAt(short, "before:phase:record_charge", "globex", "order-2001", 990);
      await crashAt(long, "after:phase:create_order", "acme", "order-1003", 300);
      await crashAt(long, "called:step:charge", "acme", "order-1004", 700);
      await new Promise((r) => setTimeout(r, SHORT_LEASE_MS + 200));
    },
  });

  return {
    get url() {
      return clone.url;
    },
    get engine() {
      return engine as Engine;
    },
  };
}
