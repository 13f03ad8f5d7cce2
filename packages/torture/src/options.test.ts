import { describe, expect, it } from "vitest";
import { parseOptions } from "./options.ts";

describe("pnpm torture options", () => {
  it("runs 1 000 intents by default and 10 000 with --long", () => {
    expect(parseOptions([]).runs).toBe(1_000);
    expect(parseOptions(["--long"])).toMatchObject({ runs: 10_000, budgetMs: 18 * 60_000 });
    expect(parseOptions(["--long", "--runs", "25000"]).runs).toBe(25_000);
    expect(parseOptions([]).faults).toBe(100);
    expect(parseOptions(["--runs", "30", "--faults", "9"]).faults).toBe(9);
  });

  it("runs the durable scenario after the main run unless told 0", () => {
    expect(parseOptions([]).durableIntents).toBe(24);
    expect(parseOptions(["--long"]).durableIntents).toBe(240);
    expect(parseOptions(["--durable-intents", "0"]).durableIntents).toBe(0);
    expect(() => parseOptions(["--durable-intents", "-1"])).toThrow("--durable-intents");
  });

  it("runs the fan-out scenario after the durable one unless told 0", () => {
    expect(parseOptions([]).fanoutParents).toBe(24);
    expect(parseOptions(["--long"]).fanoutParents).toBe(120);
    expect(parseOptions(["--fanout-parents", "0"]).fanoutParents).toBe(0);
    expect(() => parseOptions(["--fanout-parents", "x"])).toThrow("--fanout-parents");
  });

  it("runs the failover scenario with --failover: three primary kills and a switchover unless told", () => {
    expect(parseOptions([])).toMatchObject({ failover: false });
    expect(parseOptions(["--failover"])).toMatchObject({ failover: true, primaryKills: 3, switchovers: 1 });
    expect(parseOptions(["--failover", "--primary-kills", "1", "--switchovers", "0"])).toMatchObject({
      primaryKills: 1,
      switchovers: 0,
    });
    expect(() => parseOptions(["--failover", "--primary-kills", "0"])).toThrow("--primary-kills");
  });

  it("owns its server unless given a URL", () => {
    expect(parseOptions([]).databaseUrl).toBeUndefined();
    expect(parseOptions(["--database-url", "postgres://h/db"]).databaseUrl).toBe("postgres://h/db");
  });

  it("answers --help, also behind the separator pnpm passes on", () => {
    expect(parseOptions(["--help"]).help).toBe(true);
    expect(parseOptions(["--", "--help"]).help).toBe(true);
    expect(parseOptions([]).help).toBe(false);
  });

  it("refuses what it cannot use", () => {
    expect(() => parseOptions(["--runs", "0"])).toThrow("--runs must be a positive integer");
    expect(() => parseOptions(["--lease-ms", "1.5"])).toThrow("--lease-ms");
    expect(() => parseOptions(["--fast"])).toThrow();
  });
});
