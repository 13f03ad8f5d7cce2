/**
 * The physical limit of a runOnce path: the very statements the engine
 * sends, issued straight through the driver. They are not copied by hand;
 * one engine run per path is recorded through Kysely's query log on the
 * database the replica is sent to (PostgreSQL or PGlite, where the engine
 * may send a phase's begin differently), so the SQL text, parameter order
 * and transaction boundaries are exactly the engine's there and follow it
 * when the engine changes.
 *
 * Per replayed operation, the recorded key is replaced by the operation's
 * key, and every ULID the engine minted (run id, owner token, history entry
 * ids) by a fresh id, consistently across the statements of the operation,
 * so the fenced writes still match their own claim. (Should the engine stop
 * minting ULIDs, the recorded ids are reused instead; that stays correct,
 * because every key the recorded rows are unique on is fresh per operation.)
 */
import { createHash } from "node:crypto";
import type { Dialect } from "kysely";
import { Kysely } from "kysely";
import type pg from "pg";

export interface Statement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** A Kysely database that can record the statements sent while a callback runs. */
export class StatementRecorder {
  readonly db: Kysely<unknown>;
  #log: Statement[] | undefined;

  constructor(dialect: Dialect) {
    this.db = new Kysely({
      dialect,
      log: (event) => {
        // String(): the engine's prepared calls arrive as node-postgres query configs that print as their text.
        if (event.level === "query") this.#log?.push({ sql: String(event.query.sql), params: event.query.parameters });
      },
    });
  }

  async record(fn: () => Promise<unknown>): Promise<Statement[]> {
    this.#log = [];
    try {
      await fn();
      return this.#log;
    } finally {
      this.#log = undefined;
    }
  }
}

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

interface ReplicaStatement {
  readonly kind: "begin" | "commit" | "query";
  /** Prepared-statement name: one per distinct SQL text. */
  readonly name: string;
  readonly text: string;
  readonly params: readonly unknown[];
  /** For each parameter: -1 the operation's key, n >= 0 the n-th minted id, undefined kept as recorded. */
  readonly slots: readonly (number | undefined)[];
}

export interface Replica {
  readonly label: string;
  readonly statements: readonly ReplicaStatement[];
  /** Distinct ids the engine minted in the recorded run. */
  readonly idCount: number;
}

/** Turn one recorded engine run (made on `recordedKey`) into a replayable template. */
export function replicate(label: string, recorded: readonly Statement[], recordedKey: string): Replica {
  const ids = new Map<string, number>();
  const statements = recorded.map((st): ReplicaStatement => {
    const word = st.sql.trim().toLowerCase();
    // A phase's BEGIN may carry its SET LOCAL in the same message.
    const kind = /^begin\b/.test(word) ? "begin" : word === "commit" ? "commit" : "query";
    const slots = st.params.map((p) => {
      if (p === recordedKey) return -1;
      if (typeof p === "string" && ULID.test(p)) {
        if (!ids.has(p)) ids.set(p, ids.size);
        return ids.get(p);
      }
      return undefined;
    });
    const name = `bench_${createHash("sha1").update(st.sql).digest("hex").slice(0, 20)}`;
    return { kind, name, text: st.sql, params: st.params, slots };
  });
  if (!statements.some((s) => s.slots.includes(-1))) {
    throw new Error(`replica '${label}': the recorded statements never mention the key; was the right run recorded?`);
  }
  return { label, statements, idCount: ids.size };
}

let idCounter = 0;
const idPrefix = Date.now().toString(32).toUpperCase().padStart(10, "0");
/** A unique 26-character id (ULID-sized, not a ULID). */
const freshId = (): string => `${idPrefix}${(idCounter++).toString(32).toUpperCase().padStart(16, "0")}`;

function valuesFor(st: ReplicaStatement, key: string, ids: readonly string[]): unknown[] {
  return st.params.map((p, i) => {
    const slot = st.slots[i];
    if (slot === undefined) return p;
    return slot === -1 ? key : ids[slot];
  });
}

/** One replayed operation: the statements with this operation's key and fresh ids bound. */
export function bindReplica(
  replica: Replica,
  key: string,
): { kind: ReplicaStatement["kind"]; name: string; text: string; values: unknown[] }[] {
  const ids = Array.from({ length: replica.idCount }, freshId);
  return replica.statements.map((st) => ({
    kind: st.kind,
    name: st.name,
    text: st.text,
    values: valuesFor(st, key, ids),
  }));
}

/** True for a statement the engine sends (it names idempo's tables or functions), false for the workflow's own SQL. */
export const isEngineStatement = (text: string): boolean => text.includes('"idempo".');

/**
 * The replica with each transaction that holds a single engine statement
 * sent as that one autocommit statement instead (BEGIN and COMMIT dropped):
 * the same atomicity, two round trips fewer. A phase that wrote nothing
 * could commit this way.
 */
export function collapsed(replica: Replica): Replica {
  const out: ReplicaStatement[] = [];
  const st = replica.statements;
  for (let i = 0; i < st.length; i++) {
    const a = st[i] as ReplicaStatement;
    const b = st[i + 1];
    const c = st[i + 2];
    if (a.kind === "begin" && b?.kind === "query" && isEngineStatement(b.text) && c?.kind === "commit") {
      out.push(b);
      i += 2;
    } else out.push(a);
  }
  return { ...replica, label: `${replica.label} (collapsed)`, statements: out };
}

/**
 * The replica with every engine statement replaced by a call of its
 * PL/pgSQL twin (`functions` maps the statement's name to the function),
 * same parameters; the workflow's own SQL is sent as it is.
 */
export function asFunctionCalls(replica: Replica, functions: ReadonlyMap<string, string>): Replica {
  const statements = replica.statements.map((st) => {
    const fn = st.kind === "query" ? functions.get(st.name) : undefined;
    if (!fn) return st;
    const args = st.params.map((_, i) => `$${i + 1}`).join(", ");
    return { ...st, name: `${st.name}_fn`, text: `SELECT * FROM ${fn}(${args})` };
  });
  return { ...replica, label: `${replica.label} (functions)`, statements };
}

/**
 * Send a replica for `key`: statements outside a transaction go through the
 * pool (as the engine's do), a transaction holds one client from BEGIN to
 * COMMIT. `named` uses node-pg named (server-side prepared) statements;
 * otherwise unnamed ones, which is what Kysely sends.
 */
export async function sendReplica(pool: pg.Pool, replica: Replica, key: string, named: boolean): Promise<void> {
  let client: pg.PoolClient | undefined;
  try {
    for (const st of bindReplica(replica, key)) {
      if (st.kind === "begin") {
        client = await pool.connect();
        await client.query(st.text);
        continue;
      }
      if (st.kind === "commit") {
        await client?.query("commit");
        client?.release();
        client = undefined;
        continue;
      }
      const { values } = st;
      const config = named ? { name: st.name, text: st.text, values } : { text: st.text, values };
      await (client ?? pool).query(config);
    }
  } catch (error) {
    if (client) {
      await client.query("rollback").catch(() => undefined);
      client.release();
    }
    throw error;
  }
}
