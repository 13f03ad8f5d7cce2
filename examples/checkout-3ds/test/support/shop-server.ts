/**
 * The shop's web app on a free local port, with the fake provider's
 * webhooks pointed at it: what each test of the example starts first.
 */
import type { AddressInfo } from "node:net";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine } from "@idempo/core";
import { shopApp } from "../../src/app.ts";
import type { FakePsp } from "../../src/psp.ts";
import type { Checkout3ds } from "../../src/workflow.ts";

/** A running shop: its base URL, and how to stop it. */
export interface ShopServer {
  readonly url: string;
  close(): Promise<void>;
}

/** Serve the shop for `engine` and `flow` on 127.0.0.1, and send `psp`'s webhooks to it. */
export async function serveShop(engine: Engine, flow: Checkout3ds, psp: FakePsp, secret: string): Promise<ShopServer> {
  const app = shopApp(engine, flow, { webhookSecret: secret });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  psp.webhookUrl = `${url}/webhooks/psp`;
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
