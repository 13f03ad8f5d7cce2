import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { deriveChildKey, deriveStepKey } from "./derived-key.js";

describe("derived keys: deriveStepKey", () => {
  it("is deterministic for the same (tenant, key, workflow, step)", () => {
    expect(deriveStepKey("t1", "k1", "checkout", "charge")).toBe(deriveStepKey("t1", "k1", "checkout", "charge"));
  });

  it("is identical in another process", () => {
    const module = fileURLToPath(new URL("./derived-key.ts", import.meta.url));
    const script = `import { deriveStepKey } from ${JSON.stringify(module)};
      process.stdout.write(deriveStepKey("t1", "k1", "checkout", "charge"));`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      encoding: "utf8",
    });
    expect(out).toBe(deriveStepKey("t1", "k1", "checkout", "charge"));
  });

  it("does not change between releases (a resumed step must reuse the key an older version sent)", () => {
    expect(deriveStepKey("t1", "k1", "checkout", "charge")).toBe("idem_3WBjaMLFMHEtcVOevhusLzkl6x8x0AvV6vAJTLO_BYA");
  });

  it("differs across tenants, keys, workflows and steps", () => {
    const base = deriveStepKey("t1", "k", "checkout", "charge");
    expect(deriveStepKey("t2", "k", "checkout", "charge")).not.toBe(base);
    expect(deriveStepKey("t1", "K", "checkout", "charge")).not.toBe(base);
    expect(deriveStepKey("t1", "k", "refund", "charge")).not.toBe(base);
    expect(deriveStepKey("t1", "k", "checkout", "ship")).not.toBe(base);
  });

  it("encodes the parts unambiguously (no collision by shifting a separator)", () => {
    const seen = new Set([
      deriveStepKey("a|b", "c", "w", "s"),
      deriveStepKey("a", "b|c", "w", "s"),
      deriveStepKey("ab", "c", "w", "s"),
      deriveStepKey("a", "bc", "w", "s"),
      deriveStepKey("a", "b", "cw", "s"),
      deriveStepKey("a", "b", "c", "ws"),
      deriveStepKey('a","b', "c", "w", "s"),
      deriveStepKey("a", 'b","c', "w", "s"),
    ]);
    expect(seen.size).toBe(8);
  });

  it("stays within 255 characters of URL-safe ASCII, whatever the length of the parts", () => {
    const longest = [
      deriveStepKey("t".repeat(255), "k".repeat(255), "w".repeat(100), "s".repeat(100)),
      deriveStepKey("\ud83d\ude00".repeat(63), "\u20ac".repeat(85), "w", "s"),
      deriveStepKey("t", "k", "w", "s"),
    ];
    for (const k of longest) {
      expect(k.length).toBeLessThanOrEqual(255);
      expect(k).toMatch(/^[A-Za-z0-9_-]+$/);
    }
  });

  it("exposes none of its raw parts to the downstream provider", () => {
    const parts = ["tenant-acme-corp", "alice@example.com:order-77", "checkout_flow", "charge_card"] as const;
    const derived = deriveStepKey(...parts);
    for (const part of parts) {
      expect(derived).not.toContain(part);
      for (const piece of part.split(/[^A-Za-z0-9]+/).filter((p) => p.length >= 4)) {
        expect(derived.toLowerCase()).not.toContain(piece.toLowerCase());
      }
    }
  });

  it("gives a branch of a parallel item its own key, a function of all five parts", () => {
    const email = deriveStepKey("t1", "k1", "checkout", "notify", "email");
    expect(email).toBe(deriveStepKey("t1", "k1", "checkout", "notify", "email"));
    expect(email).toMatch(/^idem_[A-Za-z0-9_-]{43}$/);
    const others = [
      deriveStepKey("t1", "k1", "checkout", "notify", "sms"),
      deriveStepKey("t2", "k1", "checkout", "notify", "email"),
      deriveStepKey("t1", "k1", "checkout", "notify"),
      deriveStepKey("t1", "k1", "checkout", "notify/email"),
      deriveStepKey("t1", "k1", "checkout", "notify", "email/"),
      deriveStepKey("t1", "k1", "checkout/notify", "email"),
    ];
    expect(new Set([email, ...others]).size).toBe(others.length + 1);
    // Fixed across releases, like a step's: a resumed branch must reuse the key it sent before.
    expect(email).toBe("idem_-YQPuepJMVtWV2s_gAdug7gu61UK_PZM3eew469X4Qk");
  });

  it("gives each child of a child or map item its own key, in the parent's tenant, never a step's", () => {
    const key = deriveChildKey("t1", "k1", "payout", "fan", 2);
    expect(key).toMatch(/^child_[A-Za-z0-9_-]{43}$/);
    const others = [
      deriveChildKey("t1", "k1", "payout", "fan", 3),
      deriveChildKey("t2", "k1", "payout", "fan", 2),
      deriveChildKey("t1", "k2", "payout", "fan", 2),
      deriveChildKey("t1", "k1", "payout2", "fan", 2),
      deriveChildKey("t1", "k1", "payout", "fan2", 2),
    ];
    expect(new Set([key, ...others]).size).toBe(others.length + 1);
    // Fixed across releases: a parent resumed after a deploy must find the children it created.
    expect(key).toBe("child_ThO2cIduzsokQla54QLCAeZ5Ixj8HMmbUDqnjt6e_x8");
  });
});
