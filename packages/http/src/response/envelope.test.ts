import type { JsonValue } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { loadResponse, replayHeaderSet, storeResponse } from "./envelope.js";

const allow = replayHeaderSet(["x-request-cost"]);
const roundTrip = (body: Buffer, headers: Record<string, string | string[]> = {}) =>
  loadResponse(
    JSON.parse(JSON.stringify(storeResponse({ status: 200, headers, body, overflowed: false }, allow))) as JsonValue,
  );

describe("response storage: the stored HTTP response", () => {
  it("keeps text bodies as text and replays them byte for byte, a byte-order mark included", () => {
    const body = Buffer.from("\ufeffhé\u2028😀\u0000", "utf8");
    const stored = storeResponse({ status: 200, headers: {}, body, overflowed: false }, allow);
    expect(stored.body).toEqual({ utf8: "\ufeffhé\u2028😀\u0000" });
    expect(roundTrip(body).body.equals(body)).toBe(true);
  });

  it("keeps bodies that are not UTF-8 as base64", () => {
    const body = Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80]);
    const stored = storeResponse({ status: 200, headers: {}, body, overflowed: false }, allow);
    expect(stored.body).toEqual({ base64: body.toString("base64") });
    expect(roundTrip(body).body.equals(body)).toBe(true);
  });

  it("stores no body for an empty one", () => {
    expect(roundTrip(Buffer.alloc(0)).body.length).toBe(0);
  });

  it("keeps allow-listed headers only, and never set-cookie", () => {
    const reply = roundTrip(Buffer.from("{}"), {
      "content-type": "application/json",
      location: "/orders/1",
      "set-cookie": ["a=1", "b=2"],
      "x-request-cost": ["1", "2"],
      "x-secret": "s",
      "content-encoding": "gzip",
      vary: "Accept-Encoding",
    });
    expect(reply.headers).toEqual({
      "content-type": "application/json",
      location: "/orders/1",
      "x-request-cost": ["1", "2"],
      "content-encoding": "gzip",
      vary: "Accept-Encoding",
    });
  });

  it("refuses to configure set-cookie as a replayed header", () => {
    expect(() => replayHeaderSet(["Set-Cookie"])).toThrow(/never replayed/);
  });

  it("stores a 500 problem naming the handler's status when the body outgrew the cap", () => {
    const stored = storeResponse({ status: 201, headers: {}, body: Buffer.alloc(0), overflowed: true }, allow);
    const reply = loadResponse(stored);
    expect(reply.status).toBe(500);
    expect(reply.headers["content-type"]).toBe("application/problem+json");
    expect(JSON.parse(reply.body.toString())).toMatchObject({ code: "response_too_large", handlerStatus: 201 });
  });

  it("refuses a stored body it did not write", () => {
    expect(() => loadResponse({ orderId: "o1" })).toThrow(/not an HTTP response/);
  });
});
