/**
 * The console behind DNS rebinding: a page the operator opens on another
 * site can point its own host name at 127.0.0.1 and read the console as
 * same-origin. The console must answer only the host names it listens on
 * (with their port), and every read needs the start-up token, as actions
 * do. Two consoles on one host (cookies ignore ports) must each keep their
 * own login: opening the second used to overwrite the first's cookie.
 */

import { existsSync } from "node:fs";
import { request } from "node:http";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import type { Browser } from "playwright-core";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import type { ConsoleProcess } from "./support/console-process.ts";
import { startConsoleProcess } from "./support/console-process.ts";

const CHROMIUM = "/usr/bin/chromium";
if (!existsSync(CHROMIUM) && process.env.CI) throw new Error(`console browser tests need ${CHROMIUM}`);

const seeded = useClonedDatabase("idempo_console_rebinding", {
  pool: 2,
  prepare: async (db) => {
    // Two runs whose process died with a long lease: each console releases one.
    const long = createEngine({ db, leaseMs: 600_000 });
    setFaultHook(long, (p) => {
      if (p === "after:phase:create_order") throw new CrashSignal(p);
    });
    for (const key of ["secret-order-1", "secret-order-2"]) {
      await expect(
        long.runOnce(checkout, { tenantId: "acme", key, input: { amountCents: 4200 } }),
      ).rejects.toBeInstanceOf(CrashSignal);
    }
  },
});

/** A GET with a Host header of our choosing (what a rebound page's request carries). */
function get(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method: "GET", headers }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

const tokenOf = (c: ConsoleProcess) => new URL(c.tokenUrl as string).searchParams.get("token") as string;
const portOf = (c: ConsoleProcess) => new URL(c.url).port;

describe("the console against DNS rebinding and shared cookies", () => {
  let readOnly: ConsoleProcess;
  let first: ConsoleProcess;
  let second: ConsoleProcess;
  let engine: Engine;

  beforeAll(async () => {
    engine = createEngine({ db: seeded.db });
    [readOnly, first, second] = await Promise.all([
      startConsoleProcess(seeded.url),
      startConsoleProcess(seeded.url, ["--allow-actions"]),
      startConsoleProcess(seeded.url, ["--allow-actions"]),
    ]);
  });
  afterAll(async () => {
    await Promise.all([readOnly?.stop(), first?.stop(), second?.stop()]);
  });

  it("prints a token address even when read-only", () => {
    expect(readOnly.tokenUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{20,}$/);
  });

  it("refuses a request whose Host is not a name it listens on, token or not", async () => {
    const port = portOf(readOnly);
    for (const host of [
      `rebind.attacker.example:${port}`,
      "rebind.attacker.example",
      `127.0.0.1:${Number(port) + 1}`,
    ]) {
      for (const path of ["/runs?view=stuck", "/runs/acme/secret-order-1", "/outbox", `/?token=${tokenOf(readOnly)}`]) {
        const res = await get(readOnly.url, path, { host });
        expect([421, 403]).toContain(res.status);
        expect(res.body).not.toContain("secret-order");
        expect(res.headers["set-cookie"]).toBeUndefined();
      }
    }
  });

  it("refuses reads without the token, on every page", async () => {
    for (const path of ["/", "/runs?view=stuck", "/runs?view=recent", "/runs/acme/secret-order-1", "/outbox"]) {
      const res = await get(readOnly.url, path, { host: `127.0.0.1:${portOf(readOnly)}` });
      expect(res.status).toBe(401);
      expect(res.body).not.toContain("secret-order");
      expect(res.body).toContain("?token=");
    }
    const wrong = await get(readOnly.url, "/runs?view=stuck", {
      cookie: `idempo_console_${portOf(readOnly)}=guess`,
    });
    expect(wrong.status).toBe(401);
    const wrongToken = await get(readOnly.url, "/?token=guess");
    expect(wrongToken.status).toBe(401);
    expect(wrongToken.headers["set-cookie"]).toBeUndefined();
  });

  it("answers localhost and its own address once the token address was opened", async () => {
    const login = await get(readOnly.url, `/?token=${tokenOf(readOnly)}`, { host: `localhost:${portOf(readOnly)}` });
    expect(login.status).toBe(303);
    const cookie = String(login.headers["set-cookie"]);
    expect(cookie).toMatch(new RegExp(`^idempo_console_${portOf(readOnly)}=`));
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    // The token leaves the address bar: the redirect drops it.
    expect(login.headers.location).toBe("/runs?view=stuck");
    const pair = cookie.split(";")[0] as string;
    for (const host of [`localhost:${portOf(readOnly)}`, `127.0.0.1:${portOf(readOnly)}`]) {
      const res = await get(readOnly.url, "/runs/acme/secret-order-1", { host, cookie: pair });
      expect(res.status).toBe(200);
      expect(res.body).toContain("secret-order-1");
    }
  });

  describe.skipIf(!existsSync(CHROMIUM))("two consoles in one browser", () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
      });
    });
    afterAll(async () => {
      await browser?.close();
    });

    it("each keeps its own cookie: opening the second leaves the first's actions working", async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(first.tokenUrl as string);
      await page.goto(second.tokenUrl as string);
      const names = (await context.cookies()).map((c) => c.name).sort();
      expect(names).toEqual([`idempo_console_${portOf(first)}`, `idempo_console_${portOf(second)}`].sort());

      for (const [target, key] of [
        [first, "secret-order-1"],
        [second, "secret-order-2"],
      ] as const) {
        await page.goto(`${target.url}/runs/acme/${key}`);
        expect(await page.locator("h1").first().textContent()).toBe(key);
        await page.getByRole("button", { name: "Release lease" }).click();
        await page.getByRole("button", { name: "Confirm: Release lease" }).click();
        await page.waitForURL(/done=release/);
        expect(await page.getByRole("status").textContent()).toContain("Release lease: done.");
        expect((await engine.inspect("acme", key))?.ownerToken).toBeNull();
      }
      await context.close();
    });

    it("a browser that never opened the token address reads nothing", async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const res = await page.goto(`${first.url}/runs?view=recent`);
      expect(res?.status()).toBe(401);
      expect(await page.locator("body").textContent()).not.toContain("secret-order");
      await context.close();
    });
  });
});
