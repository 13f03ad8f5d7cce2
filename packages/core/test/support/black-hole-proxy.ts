/**
 * A TCP proxy on loopback between a client and the test's PostgreSQL that
 * can turn into a network black hole: `blackHole()` stops forwarding in both
 * directions while every socket stays open (no reset, no FIN, no error, as
 * when a NAT or firewall silently drops a connection), and `resume()` lets
 * the bytes held back through. New connections are accepted in either mode;
 * in a black hole their bytes are held back too.
 */
import net from "node:net";

export interface BlackHoleProxy {
  /** A connection string to the same database through the proxy. */
  readonly url: string;
  /** Stop forwarding, both ways, on every connection (open or later). */
  blackHole(): void;
  /**
   * Chunks held back since the black hole began, both ways: each is a
   * query, an answer or part of one. A loop whose query went out just
   * before the black hole is stuck on its answer, so both count.
   */
  readonly heldChunks: number;
  /** Forward again, the bytes held back first. */
  resume(): void;
  /** Destroy every socket and stop listening. */
  close(): Promise<void>;
}

/** Start a proxy to the host and port of `targetUrl` (a postgres:// URL). */
export async function startBlackHoleProxy(targetUrl: string): Promise<BlackHoleProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  const held: Array<{ to: net.Socket; chunk: Buffer }> = [];
  let dark = false;

  const pipe = (from: net.Socket, to: net.Socket) => {
    from.on("data", (chunk: Buffer) => {
      if (dark) held.push({ to, chunk });
      else to.write(chunk);
    });
    from.on("close", () => to.destroy());
    from.on("error", () => to.destroy());
  };

  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.on("close", () => sockets.delete(client));
    upstream.on("close", () => sockets.delete(upstream));
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(targetUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);

  return {
    url: url.toString(),
    get heldChunks() {
      return held.length;
    },
    blackHole() {
      dark = true;
    },
    resume() {
      dark = false;
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
