/** A test server listening on a free loopback port, as a `RunningApp` that closes its kept-alive connections too. */
import type http from "node:http";
import type http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { RunningApp } from "./routes.ts";

type Server = http.Server | http2.Http2Server | http2.Http2SecureServer;

/** The app of a server that is listening already. */
export function runningOn(server: Server): RunningApp {
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        if ("closeAllConnections" in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Listen on a free loopback port. */
export async function listenOnLoopback(server: http.Server | http2.Http2Server): Promise<RunningApp> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return runningOn(server);
}
