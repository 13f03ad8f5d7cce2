/**
 * The fan-out scenario's limit sampler: a connection of its own that reads,
 * every few milliseconds while the scenario runs, how many attempts hold
 * each concurrency limit key, and keeps the most it ever saw per key. Two
 * readings in one statement (one snapshot):
 *
 * - `slots`: the engine's slot table, counting the slots whose holder is
 *   live (its run in flight under the owner token that took the slot, with
 *   a lease that has not run out), over every slot number of the key.
 * - `executing`: the workflow code itself (`shop.executing`), counting the
 *   runs with a branch or step executing under the key whose attempt still
 *   owns its run under a live lease. An attempt whose process was killed
 *   keeps its row; it is counted only while its lease (and its slot) lasts.
 *
 * Neither may ever exceed the key's `max`.
 */
import pg from "pg";
import { sleep } from "./durable-context.ts";

/** The most attempts seen at once per limit key, by reading, and how many samples were taken. */
export interface LimitSamples {
  readonly samples: number;
  readonly slots: ReadonlyMap<string, number>;
  readonly executing: ReadonlyMap<string, number>;
}

const SAMPLE = `
  SELECT 'slots' AS reading, s.limit_key, count(*)::int AS n
  FROM idempo.concurrency_slots s
  WHERE s.owner_token IS NOT NULL AND idempo.slot_holder_live(s.tenant_id, s.key, s.owner_token)
  GROUP BY s.limit_key
  UNION ALL
  SELECT 'executing', e.limit_key, count(DISTINCT (e.tenant_id, e.key))::int
  FROM shop.executing e
  JOIN idempo.runs r ON r.tenant_id = e.tenant_id AND r.key = e.key AND r.attempt = e.attempt
  WHERE r.status = 'in_flight' AND r.locked_until > clock_timestamp()
  GROUP BY e.limit_key`;

/** A sampler running until `stop()`, which resolves with what it saw. */
export class LimitSampler {
  readonly #client: pg.Client;
  readonly #slots = new Map<string, number>();
  readonly #executing = new Map<string, number>();
  #samples = 0;
  #stopping = false;
  #loop: Promise<void> | undefined;

  private constructor(client: pg.Client) {
    this.#client = client;
  }

  /** Connect to `url` and start sampling every `everyMs`. */
  static async start(url: string, everyMs: number): Promise<LimitSampler> {
    const client = new pg.Client({ connectionString: url, application_name: "idempo-fanout-sampler" });
    client.on("error", () => undefined);
    await client.connect();
    const sampler = new LimitSampler(client);
    sampler.#loop = sampler.#run(everyMs);
    return sampler;
  }

  async #run(everyMs: number): Promise<void> {
    while (!this.#stopping) {
      const { rows } = await this.#client.query<{ reading: string; limit_key: string; n: number }>(SAMPLE);
      this.#samples++;
      for (const row of rows) {
        const seen = row.reading === "slots" ? this.#slots : this.#executing;
        seen.set(row.limit_key, Math.max(seen.get(row.limit_key) ?? 0, row.n));
      }
      await sleep(everyMs);
    }
  }

  /** Stop after the sample in progress; resolves with the maxima. */
  async stop(): Promise<LimitSamples> {
    this.#stopping = true;
    try {
      await this.#loop;
    } finally {
      await this.#client.end();
    }
    return { samples: this.#samples, slots: this.#slots, executing: this.#executing };
  }
}
