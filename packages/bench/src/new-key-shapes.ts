/**
 * Other shapes of the same new-key work, to measure what its round trips
 * and commits cost. Today a one-phase new key is 5 round trips and 2
 * commits: the claim (autocommit), the phase's `BEGIN; SET LOCAL`, the
 * business INSERT, the commit statement and `COMMIT`. A shape regroups the
 * very statements the engine sent (recorded in the new-key replica, with
 * this operation's key and fresh ids) into messages:
 *
 * - a message of one statement with parameters goes as a named statement,
 *   as the named replicas send it;
 * - a message of several statements goes as one simple-protocol query, the
 *   only way node-postgres sends several commands at once, so its values
 *   are written into the text as literals (pg's `escapeLiteral`).
 *
 * Each shape writes the rows the engine writes (the run, completed, its
 * history entry, the order) and keeps the fence. Where the client reads an
 * answer before it sends the next message, it checks it as the engine does
 * (the claim must be new; a commit statement that matched nothing rolls
 * back). Where the commit statement travels with `COMMIT`, nobody reads its
 * answer in time, so it is wrapped to raise instead of returning false:
 * the error skips the rest of the message, `COMMIT` included, and the
 * transaction is rolled back.
 */
import pg from "pg";
import type { Replica } from "./replica.js";
import { bindReplica, isEngineStatement } from "./replica.js";

/** One part of the new-key work: the claim, the phase's BEGIN (with its SET LOCAL), the business write, the commit statement, COMMIT. */
type Part = "claim" | "begin" | "write" | "commit" | "end";

export type ShapeId = "commit-and-end" | "one-commit" | "one-commit-3" | "one-commit-2" | "one-message";

export interface NewKeyShape {
  readonly id: ShapeId;
  /** What changes against the engine's shape today. */
  readonly label: string;
  /** The parts, grouped into the messages sent one after the other (one round trip each). */
  readonly messages: readonly (readonly Part[])[];
  /** Transactions committed per operation (an autocommit claim is one). */
  readonly commits: number;
  /**
   * Send the shape for `key`. `beforeCommit` runs just before the message
   * that holds the commit statement (the start-up check takes the run over
   * there, as another attempt would after the lease ran out).
   */
  send(pool: pg.Pool, key: string, beforeCommit?: () => Promise<void>): Promise<void>;
}

const DEFINITIONS: readonly { id: ShapeId; label: string; messages: Part[][] }[] = [
  {
    id: "commit-and-end",
    label: "today's, the commit statement and COMMIT together",
    messages: [["claim"], ["begin"], ["write"], ["commit", "end"]],
  },
  {
    id: "one-commit",
    label: "the claim inside the phase's transaction",
    messages: [["begin"], ["claim"], ["write"], ["commit"], ["end"]],
  },
  {
    id: "one-commit-3",
    label: "the claim inside the phase's transaction, 3 messages",
    messages: [["begin", "claim"], ["write"], ["commit", "end"]],
  },
  {
    id: "one-commit-2",
    label: "the claim inside the phase's transaction, 2 messages",
    messages: [
      ["begin", "claim"],
      ["write", "commit", "end"],
    ],
  },
  {
    // Not a shape the engine can take (the phase's code runs between the
    // claim and the write), but correct as SQL: when the key was taken the
    // claim inserts nothing, the fenced commit raises and nothing commits.
    // It is the floor: the rows alone, in one round trip and one commit.
    id: "one-message",
    label: "floor: everything in one message (no phase code can run in between)",
    messages: [["begin", "claim", "write", "commit", "end"]],
  },
];

/** The engine's new key today, as parts and messages (recorded as the new-key replica; no cell of its own). */
export const TODAY: readonly (readonly Part[])[] = [["claim"], ["begin"], ["write"], ["commit"], ["end"]];

const PART_NAMES: Readonly<Record<Part, string>> = {
  claim: "claim",
  begin: "BEGIN; SET LOCAL",
  write: "INSERT",
  commit: "commit statement",
  end: "COMMIT",
};

/** Messages as text, `→` between messages: `claim → BEGIN; SET LOCAL → INSERT → commit statement; COMMIT`. */
export function describeMessages(messages: readonly (readonly Part[])[]): string {
  return messages.map((m) => m.map((p) => PART_NAMES[p]).join("; ")).join(" → ");
}

/** Index of each part's statement in the new-key replica. */
type Layout = Readonly<Record<Part, number>>;

/** Where the parts are in the replica; throws when the engine's new key no longer has today's shape. */
function layout(replica: Replica): Layout {
  const kinds = replica.statements.map((s) => (s.kind === "query" && !isEngineStatement(s.text) ? "write" : s.kind));
  if (kinds.join(" ") !== "query begin write query commit") {
    throw new Error(
      `replica '${replica.label}' is no longer claim, BEGIN, one business write, commit statement, COMMIT (${kinds.join(", ")}); ` +
        "the new-key shapes need revisiting",
    );
  }
  return { claim: 0, begin: 1, write: 2, commit: 3, end: 4 };
}

/** A value as an SQL literal; unknown-typed like an unnamed parameter, so the server infers the same types. */
function literal(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "string") return pg.escapeLiteral(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") {
    return pg.escapeLiteral(String(value));
  }
  return pg.escapeLiteral(JSON.stringify(value));
}

/** The statement with its `$n` placeholders replaced by literals. */
function inlined(text: string, values: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i >= values.length) throw new Error(`statement uses $${n} but has ${values.length} values`);
    return literal(values[i]);
  });
}

/**
 * The commit statement, raising when it matched no run this attempt owns.
 * The cast runs only in the ELSE branch and reads the function's answer, so
 * it cannot be folded at plan time; the subquery is not pulled up (its
 * target list calls a volatile function), so the function runs once.
 */
const raising = (commit: string): string =>
  `SELECT CASE WHEN fenced.ok IS TRUE THEN true ELSE ('idempo: the commit matched no run this attempt owns: ' || ` +
  `coalesce(fenced.ok::text, 'null'))::boolean END AS ok FROM (${commit}) AS fenced (ok)`;

type Bound = ReturnType<typeof bindReplica>[number];

/** The rows of every statement of one query's answer (one result per statement of a multi-statement query). */
function answers(result: pg.QueryResult | pg.QueryResult[]): pg.QueryResult[] {
  return Array.isArray(result) ? result : [result];
}

function checkClaimed(results: readonly pg.QueryResult[]): void {
  const claim = results.find((r) => r.fields.some((f) => f.name === "claimed"));
  if (claim?.rows[0]?.claimed !== true) throw new Error("the claim did not insert a new key");
}

function checkCommitted(result: pg.QueryResult): void {
  const row = result.rows[0] as Record<string, unknown> | undefined;
  if (!row || Object.values(row)[0] !== true) throw new Error("the commit statement matched no run this attempt owns");
}

/** One message of a shape: one named statement, or several as one simple-protocol query. */
async function sendMessage(
  session: pg.Pool | pg.PoolClient,
  parts: readonly Part[],
  statements: Readonly<Record<Part, Bound>>,
): Promise<void> {
  if (parts.length === 1) {
    const part = parts[0] as Part;
    const st = statements[part];
    if (part === "begin" || part === "end") {
      await session.query(st.text);
      return;
    }
    const result = await session.query({ name: st.name, text: st.text, values: st.values });
    if (part === "claim") checkClaimed([result]);
    if (part === "commit") checkCommitted(result);
    return;
  }
  const text = parts
    .map((part) => {
      const st = statements[part];
      if (part === "begin" || part === "end") return st.text;
      const sql = inlined(st.text, st.values);
      return part === "commit" && parts.includes("end") ? raising(sql) : sql;
    })
    .join(";\n");
  const results = answers(await session.query(text));
  if (parts.includes("claim")) checkClaimed(results);
  if (parts.includes("commit") && !parts.includes("end")) checkCommitted(results[results.length - 1] as pg.QueryResult);
}

function shape(replica: Replica, at: Layout, def: (typeof DEFINITIONS)[number]): NewKeyShape {
  const order = def.messages.flat();
  for (const [i, message] of def.messages.entries()) {
    // The client must see the claim's answer before it sends the phase's
    // statements, unless the fenced commit and COMMIT travel with them.
    const answered = message[message.length - 1] === "claim" || message.includes("end");
    if (message.includes("claim") && !answered) throw new Error(`shape '${def.id}': the claim must end its message`);
    if (message.includes("end") && i !== def.messages.length - 1) throw new Error(`shape '${def.id}': COMMIT ends it`);
  }
  const claimOutside = order.indexOf("claim") < order.indexOf("begin");
  return {
    id: def.id,
    label: def.label,
    messages: def.messages,
    commits: claimOutside ? 2 : 1,
    async send(pool, key, beforeCommit) {
      const bound = bindReplica(replica, key);
      const statements = Object.fromEntries(
        (Object.keys(at) as Part[]).map((part) => [part, bound[at[part]] as Bound]),
      ) as Record<Part, Bound>;
      let client: pg.PoolClient | undefined;
      try {
        for (const message of def.messages) {
          if (message.includes("begin")) client = await pool.connect();
          if (message.includes("commit")) await beforeCommit?.();
          await sendMessage(client ?? pool, message, statements);
        }
        client?.release();
      } catch (error) {
        if (client) {
          await client.query("rollback").catch(() => undefined);
          client.release();
        }
        throw error;
      }
    },
  };
}

/** The shapes, made from the engine's recorded new key. */
export function newKeyShapes(replica: Replica): NewKeyShape[] {
  const at = layout(replica);
  return DEFINITIONS.map((def) => shape(replica, at, def));
}

/**
 * Run each shape once and check what it wrote, so a shape that does less
 * cannot pass for a faster one: the run completed with its history entry
 * and the order. Then once more with the run taken over just before the
 * commit statement (its owner token changed, as a takeover after an expired
 * lease does): where the claim was already committed the shape must fail
 * and leave no order behind; where the claim is still uncommitted in the
 * same transaction nobody else can see the run, the takeover matches
 * nothing, and the shape must complete.
 */
export async function checkShapes(admin: pg.Pool, shapes: readonly NewKeyShape[], tenant: string): Promise<void> {
  const state = async (key: string) => {
    const { rows } = await admin.query<{
      status: string | null;
      owner: string | null;
      history: number;
      orders: number;
    }>(
      `SELECT (SELECT status FROM idempo.runs WHERE tenant_id = $1 AND key = $2) AS status,
              (SELECT owner_token FROM idempo.runs WHERE tenant_id = $1 AND key = $2) AS owner,
              (SELECT count(*)::int FROM idempo.run_history WHERE tenant_id = $1 AND key = $2) AS history,
              (SELECT count(*)::int FROM orders WHERE id = $2) AS orders`,
      [tenant, key],
    );
    return rows[0] as { status: string | null; owner: string | null; history: number; orders: number };
  };
  for (const s of shapes) {
    const key = `check-shape-${s.id}`;
    await s.send(admin, key);
    const done = await state(key);
    if (done.status !== "completed" || done.history !== 1 || done.orders !== 1) {
      throw new Error(
        `new-key shape '${s.id}' left ${JSON.stringify(done)}, not a completed run with 1 entry and 1 order`,
      );
    }

    const lost = `check-shape-${s.id}-taken-over`;
    let taken = 0;
    const failed = await s
      .send(admin, lost, async () => {
        const r = await admin.query(
          "UPDATE idempo.runs SET owner_token = 'another-attempt' WHERE tenant_id = $1 AND key = $2 AND status = 'in_flight'",
          [tenant, lost],
        );
        taken = r.rowCount ?? 0;
      })
      .then(
        () => false,
        () => true,
      );
    const after = await state(lost);
    const fenced = taken === 1 && failed && after.orders === 0 && after.status === "in_flight";
    const unseen = taken === 0 && !failed && after.status === "completed" && after.orders === 1;
    if (!fenced && !unseen) {
      throw new Error(
        `new-key shape '${s.id}' with the run taken over before its commit: takeover matched ${taken}, ` +
          `send ${failed ? "failed" : "succeeded"}, left ${JSON.stringify(after)}`,
      );
    }
    // The bench ends by counting the new-key runs left in flight; this one was left on purpose.
    await admin.query("DELETE FROM idempo.runs WHERE tenant_id = $1 AND key = $2", [tenant, lost]);
  }
}
