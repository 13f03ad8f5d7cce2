import { brotliCompressSync, deflateRawSync, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { ReplayNotAcceptableError } from "../problem/errors.js";
import { replayForEncoding } from "./content-coding.js";
import type { HttpReply } from "./reply.js";

const TEXT = Buffer.from(JSON.stringify({ city: "Zürich", rows: [1, 2, 3] }), "utf8");
const stored = (body: Buffer, headers: HttpReply["headers"]): HttpReply => ({ status: 201, headers, body });

describe("replayForEncoding", () => {
  it("leaves a body without a content coding alone", async () => {
    const reply = stored(TEXT, { "content-type": "application/json" });
    expect(await replayForEncoding(reply, undefined)).toBe(reply);
  });

  it("sends the stored coding to a request that accepts it, and names Accept-Encoding in Vary", async () => {
    const gz = gzipSync(TEXT);
    const out = await replayForEncoding(stored(gz, { "content-encoding": "gzip", vary: "Origin" }), "br, gzip;q=0.5");
    expect(out.body.equals(gz)).toBe(true);
    expect(out.headers).toEqual({ "content-encoding": "gzip", vary: "Origin, Accept-Encoding" });
  });

  it("decodes to identity for a request that does not accept the coding (no header means identity only)", async () => {
    for (const accept of [undefined, "identity", "gzip;q=0", "br"]) {
      const out = await replayForEncoding(
        stored(gzipSync(TEXT), { "content-encoding": "gzip", vary: "accept-encoding", etag: '"v1"' }),
        accept,
      );
      expect(out.body.equals(TEXT)).toBe(true);
      // The strong validator named the encoded bytes.
      expect(out.headers).toEqual({ vary: "accept-encoding", etag: 'W/"v1"' });
    }
  });

  it("undoes several codings last first, raw deflate and x-gzip included", async () => {
    const twice = brotliCompressSync(deflateRawSync(TEXT));
    const out = await replayForEncoding(stored(twice, { "content-encoding": "deflate, br" }), "identity");
    expect(out.body.equals(TEXT)).toBe(true);
    const xgzip = await replayForEncoding(stored(gzipSync(TEXT), { "content-encoding": "x-gzip" }), "gzip");
    expect(xgzip.headers["content-encoding"]).toBe("x-gzip");
  });

  it("refuses with 406 a coding it cannot decode for a request that does not accept it", async () => {
    const reply = stored(Buffer.from("??"), { "content-encoding": "compress" });
    await expect(replayForEncoding(reply, "gzip")).rejects.toBeInstanceOf(ReplayNotAcceptableError);
    const broken = stored(Buffer.from("not gzip"), { "content-encoding": "gzip" });
    await expect(replayForEncoding(broken, undefined)).rejects.toMatchObject({
      code: "not_acceptable",
      httpStatus: 406,
    });
    // Accepted as it is: nothing to decode.
    expect((await replayForEncoding(reply, "compress")).body.toString()).toBe("??");
  });
});
