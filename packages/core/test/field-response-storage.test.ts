/**
 * Field fault of the kind "response storage (large bodies)": a large
 * response must be stored with the completion, so a retry replays it
 * byte for byte instead of running the side effect again.
 */
import { createHash } from "node:crypto";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
let engine: Engine;
let builds = 0;

const ROWS = 50_000;
const sha256 = (value: unknown) => createHash("sha256").update(JSON.stringify(value)).digest("hex");

const exporter = workflow("export")
  .phase("build", async ({ tx, tenantId, key }) => {
    builds++;
    await sql`INSERT INTO exports (tenant_id, key) VALUES (${tenantId}, ${key})`.execute(tx);
    return { rows: ROWS };
  })
  .respond(({ state }) => ({
    status: 200,
    body: Array.from({ length: state.rows }, (_, i) => ({
      id: i,
      sku: `SKU-${String(i).padStart(8, "0")}`,
      name: `Item ${i} ${"é☃".repeat(10)}${"x".repeat(20)}`,
      qty: i % 7,
      price: i * 1.25,
      tags: i % 3 === 0 ? ["a", "b"] : [],
    })),
  }));

beforeAll(async () => {
  // An 8 MB body is over the default bound of 1 MiB per stored value: this engine is set for it.
  engine = createEngine({ db: t.db, leaseMs: 5000, maxPayloadBytes: 16 * 1024 * 1024 });
  await sql`CREATE TABLE exports (id serial PRIMARY KEY, tenant_id text NOT NULL, key text NOT NULL)`.execute(t.db);
});

describe("response storage: a ~5 MiB body of 50 000 objects (BR-20)", () => {
  it("is stored with the completion and replayed with the same sha256; the phase runs once", async () => {
    const first = await engine.runOnce(exporter, { tenantId: "t1", key: "k1", input: {} });
    expect(first).toMatchObject({ status: 200, replayed: false });
    const body = first.body as unknown[];
    expect(body).toHaveLength(ROWS);
    expect(Buffer.byteLength(JSON.stringify(body), "utf8")).toBeGreaterThan(5 * 1024 * 1024);

    const replay = await engine.runOnce(exporter, { tenantId: "t1", key: "k1", input: {} });
    expect(replay.replayed).toBe(true);
    expect(replay.status).toBe(200);
    expect(sha256(replay.body)).toBe(sha256(first.body));
    expect(builds).toBe(1);

    const { rows } = await sql<{ n: number; bytes: number }>`
      SELECT (SELECT count(*)::int FROM exports) AS n,
             (SELECT octet_length(response_body::text)::int FROM idempo.runs WHERE key = 'k1') AS bytes`.execute(t.db);
    expect(rows[0]?.n).toBe(1);
    expect(rows[0]?.bytes).toBe(Buffer.byteLength(JSON.stringify(first.body), "utf8"));
    const rec = await engine.inspect("t1", "k1");
    expect(rec?.status).toBe("completed");
    expect(sha256(rec?.response?.body)).toBe(sha256(first.body));
  });
});
