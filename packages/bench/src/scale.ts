/**
 * Scale cells: does the cost of maintenance follow the work, and does the
 * hot path hold up on a big table? Each comparison runs the same engine
 * call on two schemas of the scratch database that differ only in size,
 * alternating between them per round:
 *
 * - `engine.sweep()` with nothing expired, on 1 M completed records vs 10 k;
 * - `resumeStale` (nothing of its workflows stale) and `listKeys({ stuck })`
 *   on 2 M records with 50 k in flight vs 20 k records with 500 in flight,
 *   the same 200 stuck records of another workflow in both;
 * - new-key `runOnce` at 16 clients on the big table vs an empty one.
 *
 * The tables are seeded in SQL (`INSERT ... SELECT generate_series`, copies
 * of one real record), never through the engine. `scale` multiplies the big
 * sizes (a smoke run uses a tenth); the small sides keep their size.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import type { CompiledQuery } from "kysely";
import { Kysely, PostgresDialect } from "kysely";
import type { Operation, RoundResult } from "./measure.js";
import { runLoad } from "./measure.js";
import type { PgBench } from "./setup.js";
import { INPUT, newKey, orderOnce, TENANT } from "./workload.js";

/** Stuck records in both sizes: another workflow's, so `resumeStale` finds them and passes on. */
const STUCK = 200;
const OTHER_WORKFLOW = "bench_elsewhere";

export interface ScaleSizes {
  /** Completed records for the sweep: big and small. */
  readonly sweep: readonly [number, number];
  /** Records and in-flight records for stale-run discovery: big and small. */
  readonly stale: { readonly rows: readonly [number, number]; readonly inFlight: readonly [number, number] };
  /** Records under the new-key cell (the empty side has none). */
  readonly big: number;
}

export function scaleSizes(scale: number, bigRows: number | undefined): ScaleSizes {
  const s = (n: number) => Math.round(n * scale);
  return {
    sweep: [s(1_000_000), 10_000],
    stale: { rows: [s(2_000_000), 20_000], inFlight: [s(50_000), 500] },
    big: Math.max(bigRows ?? 0, s(2_000_000)),
  };
}

export interface ScaleComparison {
  readonly id: "sweep" | "resume-stale" | "keys-stuck" | "new-key-big";
  readonly label: string;
  readonly bigRows: number;
  readonly smallRows: number;
  /** Per round, big then small. */
  readonly rounds: readonly { readonly big: RoundResult; readonly small: RoundResult }[];
  /** Seconds spent seeding the big side for this comparison (cumulative sizes are reused). */
  readonly seedSeconds: number;
  /**
   * Buffer pages one call touches (EXPLAIN ANALYZE, BUFFERS of the very
   * statements the engine sent), big and small: the machine-independent
   * view of "cost follows the work". Maintenance cells only.
   */
  readonly pages?: { readonly big: number; readonly small: number };
}

type Kind = "completed" | "in_flight" | "stuck";

/**
 * Add records `from..to` of one kind to `schema`, copied from the bench's
 * recorded new-key record. Keys are grouped 1 000 to a tenant and in order,
 * so the primary key grows at its right edge and seeding stays fast.
 */
async function seed(bench: PgBench, schema: string, kind: Kind, from: number, to: number): Promise<void> {
  if (to < from) return;
  const status = kind === "completed" ? "'completed'" : "'in_flight'";
  const inFlight = kind !== "completed";
  await bench.admin.query(
    `INSERT INTO ${schema}.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint, input,
       parsed_input_hash, status, owner_token, locked_until, attempt, recovery_point, state, retention_ms, outcome,
       response_status, response_body, expires_at, created_at, updated_at, completed_at)
     SELECT 'scale-' || (g / 1000), 'k' || lpad(g::text, 10, '0'), r.run_id || '-' || g,
            ${kind === "stuck" ? `'${OTHER_WORKFLOW}'` : "r.workflow"}, r.definition, r.definition_hash, r.fingerprint,
            r.input, r.parsed_input_hash, ${status},
            ${inFlight ? "'o' || g" : "NULL"},
            ${kind === "stuck" ? "now() - interval '1 hour'" : inFlight ? "now() + interval '1 day'" : "NULL"},
            1, ${inFlight ? "NULL" : "r.recovery_point"}, r.state, r.retention_ms,
            ${inFlight ? "NULL, NULL, NULL, NULL" : "r.outcome, r.response_status, r.response_body, now() + interval '1 day'"},
            now() - g * interval '1 millisecond', now(), ${inFlight ? "NULL" : "now()"}
     FROM idempo.runs r, generate_series($1::bigint, $2::bigint) g
     WHERE r.tenant_id = $3 AND r.key = $4`,
    [from, to, TENANT, "seed-order"],
  );
}

/** Grow `schema` to `rows` records, `inFlight` of them in flight and `stuck` stuck (counts are totals). */
class Table {
  #completed = 0;
  #inFlight = 0;
  #stuck = 0;
  constructor(
    readonly schema: string,
    readonly engine: Engine,
  ) {}

  get rows(): number {
    return this.#completed + this.#inFlight + this.#stuck;
  }

  async grow(bench: PgBench, target: { rows: number; inFlight?: number; stuck?: number }): Promise<void> {
    const next = (n: number) => this.rows + 1 + n;
    const stuck = Math.max(0, (target.stuck ?? this.#stuck) - this.#stuck);
    const inFlight = Math.max(0, (target.inFlight ?? this.#inFlight) - this.#inFlight);
    const completed = Math.max(0, target.rows - this.rows - stuck - inFlight);
    let at = next(0);
    for (const [kind, n] of [
      ["stuck", stuck],
      ["in_flight", inFlight],
      ["completed", completed],
    ] as const) {
      await seed(bench, this.schema, kind, at, at + n - 1);
      at += n;
    }
    this.#stuck += stuck;
    this.#inFlight += inFlight;
    this.#completed += completed;
    await bench.admin.query(`VACUUM ANALYZE ${this.schema}.runs`);
  }
}

/** Both sides of one comparison, alternating which goes first per round. */
async function compare(
  rounds: number,
  big: Operation,
  small: Operation,
  options: { concurrency: number; durationMs: number },
): Promise<{ big: RoundResult; small: RoundResult }[]> {
  const out: { big: RoundResult; small: RoundResult }[] = [];
  for (let round = 0; round < rounds; round++) {
    const load = { ...options, warmupMs: 200 };
    if (round % 2 === 0) {
      const b = await runLoad(big, load);
      out.push({ big: b, small: await runLoad(small, load) });
    } else {
      const s = await runLoad(small, load);
      out.push({ big: await runLoad(big, load), small: s });
    }
  }
  return out;
}

export interface ScaleOptions {
  readonly rounds: number;
  readonly seconds: number;
  readonly sizes: ScaleSizes;
  readonly log: (line: string) => void;
}

interface PlanTotals {
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
}

/** Pages the statements touch, run once more under EXPLAIN (ANALYZE, BUFFERS); they must change nothing. */
async function pagesTouched(bench: PgBench, statements: readonly CompiledQuery[]): Promise<number> {
  let pages = 0;
  for (const st of statements) {
    const { rows } = await bench.admin.query<{ "QUERY PLAN": { Plan: PlanTotals }[] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${st.sql}`,
      st.parameters as unknown[],
    );
    const plan = rows[0]?.["QUERY PLAN"][0]?.Plan;
    pages += (plan?.["Shared Hit Blocks"] ?? 0) + (plan?.["Shared Read Blocks"] ?? 0);
  }
  return pages;
}

export async function runScaleCells(bench: PgBench, o: ScaleOptions): Promise<ScaleComparison[]> {
  let captured: CompiledQuery[] | undefined;
  const db = new Kysely<unknown>({
    // The bench's 16-connection pool, not owned by this Kysely.
    dialect: new PostgresDialect({ pool: { connect: () => bench.pool(16).connect(), end: async () => {} } }),
    log: (event) => {
      if (event.level === "query") captured?.push(event.query);
    },
  });
  /** The statements one call sends, then the pages they touch. */
  const pagesOf = async (call: Operation): Promise<number> => {
    const sent: CompiledQuery[] = [];
    captured = sent;
    try {
      await call(0);
    } finally {
      captured = undefined;
    }
    return pagesTouched(bench, sent);
  };
  const pagesBoth = async (big: Operation, small: Operation) => ({
    big: await pagesOf(big),
    small: await pagesOf(small),
  });
  const table = async (schema: string) => {
    const engine = createEngine({ db, schema });
    await engine.migrate();
    return new Table(schema, engine);
  };
  const big = await table("scale_big");
  const small = await table("scale_small");
  const empty = await table("scale_empty");
  const out: ScaleComparison[] = [];
  const timed = async (fn: () => Promise<void>) => {
    const t0 = performance.now();
    await fn();
    return (performance.now() - t0) / 1000;
  };
  const maintenance = { concurrency: 1, durationMs: Math.min(1000, o.seconds * 1000) };
  try {
    const [sweepBig, sweepSmall] = o.sizes.sweep;
    o.log(`scale: seeding ${sweepBig} completed records`);
    let seedSeconds = await timed(() => big.grow(bench, { rows: sweepBig }));
    await small.grow(bench, { rows: sweepSmall });
    const sweepOn = (t: Table) => () => t.engine.sweep().then(expectNone);
    out.push({
      id: "sweep",
      label: "engine.sweep(), nothing expired",
      bigRows: big.rows,
      smallRows: small.rows,
      seedSeconds,
      rounds: await compare(o.rounds, sweepOn(big), sweepOn(small), maintenance),
      pages: await pagesBoth(sweepOn(big), sweepOn(small)),
    });

    const { rows, inFlight } = o.sizes.stale;
    o.log(`scale: growing to ${rows[0]} records, ${inFlight[0]} in flight`);
    seedSeconds = await timed(() => big.grow(bench, { rows: rows[0], inFlight: inFlight[0], stuck: STUCK }));
    await small.grow(bench, { rows: rows[1], inFlight: inFlight[1], stuck: STUCK });
    const resume = (t: Table) => async () => {
      const report = await t.engine.resumeStale({ workflows: [orderOnce] });
      if (report.resumed.length + report.failed.length > 0) throw new Error("resumeStale found a run of its own");
    };
    const stuck = (t: Table) => async () => {
      const page = await t.engine.listKeys({ stuck: true, limit: 50 });
      if (page.items.length !== 50) throw new Error(`keys stuck listed ${page.items.length}, not 50`);
    };
    for (const [id, label, op] of [
      ["resume-stale", "resumeStale, nothing of its workflows stale", resume],
      ["keys-stuck", "listKeys({ stuck: true, limit: 50 })", stuck],
    ] as const) {
      out.push({
        id,
        label,
        bigRows: big.rows,
        smallRows: small.rows,
        seedSeconds: id === "resume-stale" ? seedSeconds : 0,
        rounds: await compare(o.rounds, op(big), op(small), maintenance),
        pages: await pagesBoth(op(big), op(small)),
      });
    }

    o.log(`scale: growing to ${o.sizes.big} records for the new-key cell`);
    seedSeconds = await timed(() => big.grow(bench, { rows: o.sizes.big }));
    const newKeyOn = (t: Table) => async () => {
      const res = await t.engine.runOnce(orderOnce, { tenantId: TENANT, key: newKey(), input: INPUT });
      if (res.status !== 201 || res.replayed) throw new Error(`new key answered ${res.status}`);
    };
    out.push({
      id: "new-key-big",
      label: "new key, one phase, 16 clients",
      bigRows: big.rows,
      smallRows: 0,
      seedSeconds,
      rounds: await compare(o.rounds, newKeyOn(big), newKeyOn(empty), {
        concurrency: 16,
        durationMs: o.seconds * 1000,
      }),
    });
    return out;
  } finally {
    await db.destroy();
    // Free the disk at once: the big schema holds gigabytes at full size.
    for (const t of [big, small, empty]) await bench.admin.query(`DROP SCHEMA ${t.schema} CASCADE`);
  }
}

function expectNone(n: number): void {
  if (n !== 0) throw new Error(`the sweep deleted ${n} records; nothing should have expired`);
}
