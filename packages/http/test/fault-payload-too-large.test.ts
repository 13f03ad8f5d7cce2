/**
 * Fault of the kind "nothing bounds what is stored", seen through HTTP: a
 * request whose input is over the engine's `maxPayloadBytes` (1 MiB by
 * default, below the adapters' 4 MiB request limit) is answered 413
 * `payload_too_large` and nothing is claimed, on a wrapped route and on a
 * workflow route.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createEngine, workflow } from "@idempo/core";
import express from "express";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const tenant = () => "t1";
const MIB = 1024 * 1024;

async function rows(key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${key}`.execute(
    t.db,
  );
  return rows[0]?.n ?? 0;
}

describe("the engine's bound on a stored value, through HTTP", () => {
  it("a 2 MiB request under the engine's default bound is refused with 413 payload_too_large; nothing is claimed", async () => {
    const engine = createEngine({ db: t.db });
    let ran = 0;
    const flow = workflow("big_request")
      .phase("p", () => {
        ran++;
      })
      .respond(() => ({ status: 201, body: null }));
    const app = express();
    app.post("/wrapped", express.json({ limit: 4 * MIB }), ex.idempotency(engine, { tenant }), (_req, res) => {
      ran++;
      res.status(201).json({});
    });
    app.post(
      "/flow",
      express.json({ limit: 4 * MIB }),
      ex.idempotent(engine, flow, { tenant, input: (req) => req.body }),
    );
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const path of ["/wrapped", "/flow"]) {
        const key = `big-${path.slice(1)}`;
        const answer = await send(url, {
          path,
          headers: [["Idempotency-Key", key]],
          json: { blob: "b".repeat(2 * MIB) },
        });
        expect(answer.status, path).toBe(413);
        expect(answer.json, path).toMatchObject({ code: "payload_too_large", title: "Payload too large to store" });
        expect(await rows(key), path).toBe(0);
      }
      expect(ran).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
