/**
 * After the chaos, with every worker dead: what an operator's process does.
 * `resumeStale` finishes every run left in flight; intents that never got
 * as far as a claim are sent once more (their clients retry); a relay
 * drains the outbox; and every key is replayed once more, so each stored
 * response is compared with what the first client got.
 */
import type { RunResult } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { kyselyOn, openPool, persistently } from "./database.ts";
import type { Intent, IntentBook } from "./intents.ts";
import { mailboxHandlers } from "./mailbox.ts";
import { FakeProvider } from "./provider.ts";
import { buildWorkflows } from "./workflows/catalogue.ts";

export interface FinishOptions {
  readonly url: string;
  readonly leaseMs: number;
  readonly book: IntentBook;
  readonly log: (line: string) => void;
}

export interface Finish {
  /** Runs `resumeStale` finished. */
  readonly resumed: number;
  /** Intents with no record at all, sent once more. */
  readonly retried: number;
  /** `<status> <body>` of the final replay, by intent id. */
  readonly replays: ReadonlyMap<number, string>;
  readonly problems: readonly string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Run `fn` over `items`, `width` at a time. */
async function inParallel<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: width }, lane));
}

export async function finish(options: FinishOptions): Promise<Finish> {
  const { book, log } = options;
  const pool = openPool(options.url, "idempo-torture-driver-finish", 12);
  const providerPool = openPool(options.url, "idempo-torture-driver-provider", 6);
  const engine = createEngine({ db: kyselyOn(pool), leaseMs: options.leaseMs });
  const workflows = buildWorkflows(new FakeProvider(providerPool));
  const problems: string[] = [];
  try {
    // 1. Abandoned runs: wait out their leases and take each over.
    let resumed = 0;
    const deadline = Date.now() + Math.max(120_000, options.leaseMs * 40);
    for (;;) {
      const report = await persistently(() => engine.resumeStale({ workflows: Object.values(workflows), limit: 500 }));
      resumed += report.resumed.length;
      for (const f of report.failed) log(`resumeStale failed on ${f.tenantId}/${f.key}: ${f.error.message}`);
      const { rows } = await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM idempo.runs WHERE status = 'in_flight'",
      );
      if ((rows[0]?.n ?? 0) === 0) break;
      if (Date.now() > deadline) {
        problems.push(`${rows[0]?.n} runs still in flight after resumeStale`);
        break;
      }
      if (report.resumed.length === 0) await sleep(Math.max(50, options.leaseMs / 4));
    }
    log(`resumeStale finished ${resumed} abandoned runs`);

    // 2. Intents no attempt ever claimed (the client gave up before its first call got through): retry them.
    const { rows: known } = await pool.query<{ tenant_id: string; key: string }>(
      "SELECT tenant_id, key FROM idempo.runs",
    );
    const recorded = new Set(known.map((r) => `${r.tenant_id}\u0000${r.key}`));
    const unclaimed = book.intents.filter((i) => !recorded.has(`${i.tenantId}\u0000${i.key}`));
    const call = (i: Intent): Promise<RunResult<unknown>> =>
      engine.runOnce(workflows[i.workflow], { tenantId: i.tenantId, key: i.key, input: i.input });
    await inParallel(unclaimed, 8, async (i) => {
      const res = await call(i);
      book.observe(i, { kind: "response", status: res.status, text: JSON.stringify(res.body), replayed: res.replayed });
    });

    // 3. Drain the outbox: messages a killed relay held come back once its claim runs out.
    const relay = engine.startRelay({
      handlers: mailboxHandlers(pool),
      pollIntervalMs: 50,
      backoffMs: 20,
      maxBackoffMs: 200,
      maxAttempts: 10_000,
      concurrency: 8,
    });
    try {
      const drainBy = Date.now() + Math.max(60_000, options.leaseMs * 20);
      for (;;) {
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM idempo.outbox WHERE status <> 'delivered'",
        );
        if ((rows[0]?.n ?? 0) === 0) break;
        if (Date.now() > drainBy) {
          problems.push(`${rows[0]?.n} outbox messages not delivered after the drain`);
          break;
        }
        await sleep(100);
      }
    } finally {
      await relay.stop();
    }

    // 4. Replay every key once more.
    const replays = new Map<number, string>();
    await inParallel(book.intents, 16, async (i) => {
      const res = await call(i);
      const text = JSON.stringify(res.body);
      if (!res.replayed)
        problems.push(`${i.tenantId}/${i.key}: the final replay ran the intent instead of replaying it`);
      book.observe(i, { kind: "response", status: res.status, text, replayed: res.replayed }, false);
      replays.set(i.id, `${res.status} ${text}`);
    });
    return { resumed, retried: unclaimed.length, replays, problems };
  } finally {
    await pool.end();
    await providerPool.end();
  }
}
