import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { allowedHosts, hostAllowed } from "./hosts.js";

describe("the Host names a console answers", () => {
  it("on loopback: the loopback names with the console's port, nothing else", () => {
    const allowed = allowedHosts("127.0.0.1", 4300);
    for (const host of ["127.0.0.1:4300", "localhost:4300", "LOCALHOST:4300", "[::1]:4300"]) {
      expect(hostAllowed(host, allowed)).toBe(true);
    }
    for (const host of [
      "rebind.attacker.example:4300",
      "localhost:4301",
      "localhost",
      "127.0.0.1:4300.evil",
      "",
      undefined,
      "localhost:4300:4300",
    ]) {
      expect(hostAllowed(host, allowed)).toBe(false);
    }
  });

  it("a Host without a port means port 80", () => {
    expect(hostAllowed("localhost", allowedHosts("127.0.0.1", 80))).toBe(true);
  });

  it("on one other address: that address only", () => {
    const allowed = allowedHosts("10.1.2.3", 4300);
    expect(hostAllowed("10.1.2.3:4300", allowed)).toBe(true);
    expect(hostAllowed("localhost:4300", allowed)).toBe(false);
  });

  it("on every interface: this machine's addresses and host name", () => {
    const allowed = allowedHosts("0.0.0.0", 4300);
    expect(hostAllowed("127.0.0.1:4300", allowed)).toBe(true);
    expect(hostAllowed(`${hostname()}:4300`, allowed)).toBe(true);
    expect(hostAllowed("rebind.attacker.example:4300", allowed)).toBe(false);
  });

  it("on IPv6 loopback, and names given with --allow-host, with or without their port", () => {
    const allowed = allowedHosts("::1", 4300, ["console.internal", "localhost:9000", "[fd00::1]:8080"]);
    expect(hostAllowed("[::1]:4300", allowed)).toBe(true);
    expect(hostAllowed("console.internal:4300", allowed)).toBe(true);
    expect(hostAllowed("console.internal:9000", allowed)).toBe(false);
    expect(hostAllowed("localhost:9000", allowed)).toBe(true);
    expect(hostAllowed("[fd00::1]:8080", allowed)).toBe(true);
  });
});
