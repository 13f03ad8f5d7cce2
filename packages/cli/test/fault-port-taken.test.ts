/**
 * A console asked to listen on a port another process holds must say so,
 * not report the bind failure as a database error (it used to print
 * "database error at 127.0.0.1:5432: listen EADDRINUSE", sending the
 * operator to the wrong server).
 */
import type { Server } from "node:net";
import { createServer } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { idempo } from "./support/cli.ts";

const clone = useClonedDatabase("idempo_cli_port");
let holder: Server;
let port: number;

beforeAll(async () => {
  holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  port = (holder.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => holder.close(() => resolve()));
});

it("idempo console on a port that is taken says the port is taken, and exits 1", async () => {
  const res = await idempo(["console", "--port", String(port)], { DATABASE_URL: clone.url });
  expect(res.code).toBe(1);
  expect(res.stdout).toBe("");
  expect(res.stderr).not.toMatch(/database/);
  expect(res.stderr).toBe(
    `idempo: port ${port} on 127.0.0.1 is taken by another process: stop it, or pass another --port (0 picks a free one)\n`,
  );
});
