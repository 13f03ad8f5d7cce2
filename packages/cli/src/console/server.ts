/** Serving the console: bind (loopback unless told otherwise), mint its token, and stop cleanly. */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { OperationalError } from "../errors.js";
import type { ConsoleContext } from "./app.js";
import { consoleApp } from "./app.js";
import { mintToken, tokenCookie } from "./auth.js";
import { allowedHosts } from "./hosts.js";

/** Why a listen failed, in operator words; undefined for a cause this does not know. */
const LISTEN_CAUSES: Record<string, (host: string, port: number) => string> = {
  EADDRINUSE: (host, port) =>
    `port ${port} on ${host} is taken by another process: stop it, or pass another --port (0 picks a free one)`,
  EACCES: (host, port) =>
    `not allowed to listen on port ${port} on ${host}: pass a port above 1023 (0 picks a free one)`,
  EADDRNOTAVAIL: (host) => `cannot listen on ${host}: no network interface of this machine has that address`,
};

/**
 * A failed bind as an operational error. The socket error's code (EADDRINUSE
 * and the like) would otherwise read as a database failure to the command's
 * error handling, which names the database server.
 */
function listenError(error: unknown, host: string, port: number): Error {
  const code = (error as { code?: unknown } | null)?.code;
  const cause = typeof code === "string" ? LISTEN_CAUSES[code] : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return new OperationalError(cause ? cause(host, port) : `cannot listen on ${host}:${port}: ${message}`, {
    cause: error,
  });
}

/** A running console. */
export interface ConsoleServer {
  /** `http://host:port` it listens on. */
  readonly url: string;
  /** The address that logs a browser in: `url` with the start-up token. */
  readonly loginUrl: string;
  close(): Promise<void>;
}

/**
 * Start the console on `host:port` (port 0 picks a free one). It answers
 * the host names of `host` (see `allowedHosts`) and those of `extraHosts`,
 * and only browsers that opened `loginUrl`.
 */
export function startConsole(
  ctx: ConsoleContext,
  host: string,
  port: number,
  extraHosts: readonly string[] = [],
): Promise<ConsoleServer> {
  const token = mintToken();
  // The routes need the bound port (for the Host check and the cookie's name), known once listening.
  let app: Hono | undefined;
  return new Promise((resolve, reject) => {
    const server = serve(
      {
        fetch: (request, env) => (app ? app.fetch(request, env) : new Response("starting", { status: 503 })),
        hostname: host,
        port,
      },
      (info: AddressInfo) => {
        app = consoleApp(ctx, {
          token,
          cookie: tokenCookie(info.port),
          hosts: allowedHosts(host, info.port, extraHosts),
        });
        const shown = info.family === "IPv6" ? `[${info.address}]` : info.address;
        const url = `http://${shown}:${info.port}`;
        resolve({
          url,
          loginUrl: `${url}/?token=${token}`,
          close: () =>
            new Promise<void>((done) => {
              server.close(() => done());
              // Browsers keep idle connections open; without this, close waits for them.
              (server as Server).closeAllConnections();
            }),
        });
      },
    );
    server.once("error", (error) => reject(listenError(error, host, port)));
  });
}
