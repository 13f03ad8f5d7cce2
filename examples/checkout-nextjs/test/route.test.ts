/**
 * The Next.js route app/api/checkout/route.ts, built with `next build` and
 * served by `next start` on loopback, driven over HTTP on real PostgreSQL:
 * a key runs the checkout once, its retry is replayed, the same key with
 * another body is 422, a retry while the first is in flight is 409, no key
 * is 400. Building needs the packages' dist/ (brought up to date here) and
 * the Next.js toolchain: where `next` is not installed the test is skipped
 * and says why; a build that fails fails the test.
 */
import type { ChildProcess } from "node:child_process";
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { CREATE_TABLES } from "../lib/checkout.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = join(root, "..", "..");
const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
const BUILD_TIMEOUT_MS = 20 * 60_000;

const next = join(root, "node_modules", "next", "dist", "bin", "next");
const missing = existsSync(next) ? undefined : "next is not installed (pnpm install)";
if (missing !== undefined) console.warn(`SKIPPED the Next.js route test: ${missing}`);

/**
 * Build the packages the route imports (it loads their dist/, as an
 * installed app does; `tsc -b` is incremental, so an up-to-date dist/ costs
 * little), then the app. Throws with the build's output when either fails.
 */
function build(): void {
  const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
  const packages = spawnSync(process.execPath, [tsc, "-b", join(repo, "packages", "http")], { encoding: "utf8" });
  if (packages.status !== 0) throw new Error(`building @idempo/http failed: ${packages.stdout}${packages.stderr}`);
  const app = spawnSync(process.execPath, [next, "build"], {
    cwd: root,
    env,
    encoding: "utf8",
    timeout: BUILD_TIMEOUT_MS,
  });
  if (app.status !== 0)
    throw new Error(`next build ended with ${app.signal ?? app.status}: ${app.stdout}${app.stderr}`);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.skipIf(missing !== undefined)("the Next.js route handler app/api/checkout/route.ts", () => {
  const clone = useClonedDatabase("idempo_next_t", {
    prepare: async (db) => {
      await sql.raw(CREATE_TABLES).execute(db);
    },
  });
  let server: ChildProcess | undefined;
  let base = "";

  beforeAll(async () => {
    build();
    const port = await freePort();
    server = spawn(process.execPath, [next, "start", "-H", "127.0.0.1", "-p", String(port)], {
      cwd: root,
      env: { ...env, DATABASE_URL: clone.url },
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      let out = "";
      server?.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8");
        if (/Ready in|started server/i.test(out)) resolve();
      });
      server?.once("exit", (code) => reject(new Error(`next start exited with ${code}: ${out}`)));
    });
    base = `http://127.0.0.1:${port}`;
  }, BUILD_TIMEOUT_MS);
  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server?.once("exit", resolve));
      server.kill("SIGTERM");
      await exited;
    }
  });

  const post = (key: string | undefined, body: unknown) =>
    fetch(`${base}/api/checkout`, {
      method: "POST",
      headers: {
        authorization: "Bearer sk_test_acme",
        "content-type": "application/json",
        ...(key === undefined ? {} : { "idempotency-key": key }),
      },
      body: JSON.stringify(body),
    });
  const ordersFor = async (cartId: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE cart_id = ${cartId}`.execute(clone.db))
      .rows[0]?.n;
  const codeOf = async (res: Response) => ((await res.json()) as { code?: string }).code;

  it("a key runs the checkout once; its retry gets the same answer, marked replayed; another body is 422", async () => {
    const body = { cartId: "cart-1", amountCents: 1500 };
    const first = await post("order-1", body);
    const firstBody = await first.text();
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const replay = await post("order-1", body);
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await replay.text()).toBe(firstBody);
    expect(await ordersFor("cart-1")).toBe(1);

    const other = await post("order-1", { cartId: "cart-1", amountCents: 9900 });
    expect(other.status).toBe(422);
    expect(other.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await codeOf(other)).toBe("key_mismatch");
    expect(await ordersFor("cart-1")).toBe(1);
  });

  it("a retry while the first request is in flight gets 409 with Retry-After, then the replay", async () => {
    const body = { cartId: "hold-1", amountCents: 700 };
    const first = post("order-held", body);
    // In flight once its row exists: the phase waits for the release below.
    for (;;) {
      const { rows } = await sql`SELECT 1 FROM idempo.runs WHERE key = 'order-held'`.execute(clone.db);
      if (rows.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const busy = await post("order-held", body);
    expect(busy.status).toBe(409);
    expect(busy.headers.get("retry-after")).not.toBeNull();
    expect(await codeOf(busy)).toBe("key_in_progress");
    await sql`INSERT INTO releases (cart_id) VALUES ('hold-1')`.execute(clone.db);
    const done = await first;
    expect(done.status).toBe(201);
    const replay = await post("order-held", body);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await replay.text()).toBe(await done.text());
    expect(await ordersFor("hold-1")).toBe(1);
  });

  it("a request without a key is refused with 400 key_missing, and nothing runs", async () => {
    const res = await post(undefined, { cartId: "cart-none", amountCents: 100 });
    expect(res.status).toBe(400);
    expect(await codeOf(res)).toBe("key_missing");
    expect(await ordersFor("cart-none")).toBe(0);
  });
});
