/**
 * HTTP replay of a stored response (framing headers, content coding, media
 * type in the fingerprint), on each adapter with the compression middleware
 * a user of that framework mounts: `compression` on Express,
 * `@fastify/compress` on Fastify, Hono's `compress`. Each is mounted outside
 * idempo (it compresses what idempo sends) and inside it (idempo stores
 * what it compressed). A replay never sends a content coding the replaying
 * request does not accept, and keeps `Vary`; framing is recomputed on every
 * answer; a CSV answer replays with its charset; a request of another media
 * type never replays a JSON request's answer; 204 and 304 replay with no
 * body on a connection that stays usable. Real servers on loopback, real
 * PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { App, Start } from "./support/apps/compression-apps.ts";
import { CSV, CSV_TYPE, harnesses, JSON_TYPE, MANUAL, runs } from "./support/apps/compression-apps.ts";
import type { Request, Sent } from "./support/client.ts";
import { onOneSocket, send, sendH2 } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();

/** The content codings of a response, identity left out. */
const codingsOf = (res: Sent) =>
  String(res.headers["content-encoding"] ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");

/** The body after undoing the response's content coding (each one, last applied first). */
function decoded(res: Sent): Buffer {
  let body = res.body;
  for (const coding of codingsOf(res).reverse()) {
    if (coding === "gzip" || coding === "x-gzip") body = gunzipSync(body);
    else if (coding === "br") body = brotliDecompressSync(body);
    else if (coding === "deflate") body = inflateSync(body);
    else throw new Error(`the test cannot decode '${coding}'`);
  }
  return body;
}

const varyNames = (res: Sent) =>
  String(res.headers.vary ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== "");

/** Framing is the server's: a declared length equals the bytes sent, never next to chunking. */
function expectFramed(res: Sent): void {
  const length = res.headers["content-length"];
  if (length !== undefined) {
    expect(Number(length)).toBe(res.body.length);
    expect(res.headers["transfer-encoding"]).toBeUndefined();
  }
}

describe.each(Object.keys(harnesses))("%s", (name) => {
  const harness = harnesses[name] as { start: Start; http2: boolean };
  let app: App;
  beforeAll(async () => {
    app = await harness.start(t.engine, {});
  });
  afterAll(async () => {
    await app?.close();
  });

  const fresh = () => randomUUID().slice(0, 8);
  const post = (path: string, key: string, json: unknown, acceptEncoding?: string) =>
    send(app.url, {
      path,
      headers: [
        ["Idempotency-Key", key],
        ...(acceptEncoding === undefined ? [] : [["Accept-Encoding", acceptEncoding] as [string, string]]),
      ],
      json,
    });

  describe.each(["inside", "outside"])("compression mounted %s idempo", (where) => {
    it("a replay never sends a content coding the request does not accept, and keeps Vary: Accept-Encoding", async () => {
      const key = `k1-${fresh()}`;
      const tag = `report-${where}-${key}`;
      const path = `/${where}/report`;
      const body = { tag };
      const first = await post(path, key, body, "gzip");
      expect(first.status).toBe(201);
      expect(codingsOf(first)).toEqual(["gzip"]);
      const content = decoded(first);
      expect(JSON.parse(content.toString("utf8"))).toMatchObject({ tag });
      expectFramed(first);

      const cases: [string | undefined, readonly string[]][] = [
        ["gzip", ["gzip"]],
        ["identity", []],
        [undefined, []],
        ["gzip;q=0, identity", []],
        ["br", ["br"]],
        ["deflate;q=0.5, gzip;q=0", ["deflate"]],
      ];
      const seen = [];
      const expected = [];
      for (const [accept, allowed] of cases) {
        const replay = await post(path, key, body, accept);
        // What the same request gets from the app when it runs: an encoder outside sets Vary (or not) alike.
        const fresh =
          where === "outside"
            ? await post(path, `fresh-${key}-${seen.length}`, { tag: `fresh-${tag}` }, accept)
            : undefined;
        seen.push({
          accept,
          status: replay.status,
          replayed: replay.headers["idempotent-replayed"],
          // Each coding sent is one this request accepts (an encoder outside may pick any of them, or none).
          accepted: codingsOf(replay).every((coding) => allowed.includes(coding)),
          sameContent: decoded(replay).equals(content),
          type: replay.headers["content-type"],
          varyAcceptEncoding: varyNames(replay).includes("accept-encoding"),
        });
        expected.push({
          accept,
          status: 201,
          replayed: "true",
          accepted: true,
          sameContent: true,
          type: JSON_TYPE,
          varyAcceptEncoding: fresh ? varyNames(fresh).includes("accept-encoding") : true,
        });
        expectFramed(replay);
      }
      expect(seen).toEqual(expected);
      expect(runs(tag)).toBe(1);
    });
  });

  it("a CSV answer replays with the same Content-Type, charset included, and the same bytes", async () => {
    const key = `k2-${fresh()}`;
    const first = await post("/csv", key, { tag: key });
    const replay = await post("/csv", key, { tag: key });
    expect(first.status).toBe(200);
    expect(first.body.toString("utf8")).toBe(CSV);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.headers["content-type"]).toBe(CSV_TYPE);
    expect(first.headers["content-type"]).toBe(CSV_TYPE);
    expect(replay.body.equals(first.body)).toBe(true);
    expectFramed(first);
    expectFramed(replay);
    expect(runs(key)).toBe(1);
  });

  it("a Content-Length set by hand is never stored: each answer declares the bytes it sends", async () => {
    const key = `k-len-${fresh()}`;
    const first = await post("/manual-length", key, { tag: key });
    const replay = await post("/manual-length", key, { tag: key });
    for (const res of [first, replay]) {
      expect(res.status).toBe(200);
      expect(res.body.toString("utf8")).toBe(MANUAL);
      expectFramed(res);
    }
    expect(replay.headers["idempotent-replayed"]).toBe("true");
  });

  it("the same bytes under another media type never replay the JSON request's answer", async () => {
    const text = JSON.stringify({ amountCents: 500 });
    const keys: string[] = [];
    for (const path of ["/amounts", "/charges"]) {
      const key = `k3-${fresh()}`;
      keys.push(key);
      const first = await send(app.url, {
        path,
        headers: [
          ["Idempotency-Key", key],
          ["Content-Type", "application/json"],
        ],
        body: text,
      });
      expect({ path, status: first.status }).toEqual({ path, status: 201 });
      for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {
        const other = await send(app.url, {
          path,
          headers: [
            ["Idempotency-Key", key],
            ["Content-Type", type],
          ],
          body: text,
        });
        expect({ path, type, replayed: other.headers["idempotent-replayed"] }).toEqual({
          path,
          type,
          replayed: undefined,
        });
        expect({ path, type, refused: [400, 415, 422].includes(other.status) }).toEqual({ path, type, refused: true });
      }
    }
    // Nothing ran for the other media types: one run of each route.
    expect(keys.map((key) => runs(`run:${key}`))).toEqual([1, 1]);
  });

  it("204 and 304 replay with no body and no positive Content-Length, and the kept-alive socket stays usable", async () => {
    for (const path of ["/no-content", "/not-modified"]) {
      const key = `k4-${fresh()}`;
      const request: Request = { path, headers: [["Idempotency-Key", key]], json: { tag: key } };
      const [first, replay, reused] = await onOneSocket(app.url, request, request);
      const [again, next, reusedAgain] = await onOneSocket(app.url, request, {
        path: "/csv",
        headers: [["Idempotency-Key", `after-${key}`]],
        json: { tag: `after-${key}` },
      });
      const status = path === "/no-content" ? 204 : 304;
      for (const res of [first, replay, again]) {
        expect({ path, status: res.status, length: res.body.length }).toEqual({ path, status, length: 0 });
        expect(Number(res.headers["content-length"] ?? 0)).toBe(0);
      }
      expect(replay.headers["idempotent-replayed"]).toBe("true");
      expect({ path, reused, reusedAgain, next: next.status }).toEqual({
        path,
        reused: true,
        reusedAgain: true,
        next: 200,
      });
      expect(runs(key)).toBe(1);
    }
  });

  it.runIf(harness.http2)("204 and 304 replay over HTTP/2 with no body", async () => {
    const h2 = await harness.start(t.engine, { http2: true });
    try {
      for (const path of ["/no-content", "/not-modified"]) {
        const key = `k4h2-${fresh()}`;
        const request: Request = { path, headers: [["idempotency-key", key]], json: { tag: key } };
        const first = await sendH2(h2.url, request);
        const replay = await sendH2(h2.url, request);
        const status = path === "/no-content" ? 204 : 304;
        for (const res of [first, replay]) {
          expect({ path, status: res.status, length: res.body.length }).toEqual({ path, status, length: 0 });
          expect(Number(res.headers["content-length"] ?? 0)).toBe(0);
        }
        expect(replay.headers["idempotent-replayed"]).toBe("true");
        expect(runs(key)).toBe(1);
      }
    } finally {
      await h2.close();
    }
  });
});
