/** Serving the console: bind (loopback unless told otherwise), and stop cleanly. */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { ConsoleContext } from "./app.js";
import { consoleApp } from "./app.js";

/** A running console. */
export interface ConsoleServer {
  /** `http://host:port` it listens on. */
  readonly url: string;
  close(): Promise<void>;
}

/** Start the console on `host:port` (port 0 picks a free one). */
export function startConsole(ctx: ConsoleContext, host: string, port: number): Promise<ConsoleServer> {
  const app = consoleApp(ctx);
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      const shown = info.family === "IPv6" ? `[${info.address}]` : info.address;
      resolve({
        url: `http://${shown}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Browsers keep idle connections open; without this, close waits for them.
            (server as Server).closeAllConnections();
          }),
      });
    });
    server.once("error", reject);
  });
}
