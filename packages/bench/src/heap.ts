/**
 * Client heap growth: does the engine keep anything per run? One engine on
 * a plain pool runs a mix of new keys (one in five) and replays at 16
 * clients; the heap is read after a forced full GC once `first` runs are
 * done and again after `total`. A leak of even a few hundred bytes per run
 * shows as a ratio well above 1.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Engine } from "@idempo/core";
import { replayKey } from "./cells.js";
import { INPUT, newKey, orderOnce, TENANT } from "./workload.js";

export interface HeapResult {
  readonly first: number;
  readonly total: number;
  /** heapUsed after a forced GC, bytes. */
  readonly heapAfterFirst: number;
  readonly heapAfterTotal: number;
}

/** The engine's GC hook without restarting node with --expose-gc. */
function forcedGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

function settledHeap(gc: () => void): number {
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
}

export async function measureHeap(engine: Engine, first: number, total: number): Promise<HeapResult> {
  const gc = forcedGc();
  let done = 0;
  const run = async (until: number) => {
    const worker = async () => {
      while (done < until) {
        const n = done++;
        if (n % 5 === 0) {
          const res = await engine.runOnce(orderOnce, { tenantId: TENANT, key: newKey(), input: INPUT });
          if (res.status !== 201) throw new Error(`new key answered ${res.status}`);
        } else {
          const res = await engine.runOnce(orderOnce, { tenantId: "replay", key: replayKey(), input: INPUT });
          if (!res.replayed) throw new Error("replay ran the workflow again");
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
  };
  await run(first);
  const heapAfterFirst = settledHeap(gc);
  await run(total);
  const heapAfterTotal = settledHeap(gc);
  return { first, total, heapAfterFirst, heapAfterTotal };
}
