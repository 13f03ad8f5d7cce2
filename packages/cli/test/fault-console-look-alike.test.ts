/**
 * Look-alike strings in the console: `k\u202Egnp.exe` rendered raw reads
 * "kexe.png", and `order-1` and `order-1\u200B` look the same, so an
 * operator cancels the wrong run. Every stored string the console shows
 * (tenants, keys, workflow and item names, reasons, errors, the JSON of
 * input, state and response, outbox topics) must have its invisible and
 * bidirectional characters escaped, as `idempo keys` prints them; links
 * must still lead to the exact run.
 */
import { existsSync } from "node:fs";
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import type { Browser, Page } from "playwright-core";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { idempo } from "./support/cli.ts";
import type { ConsoleProcess } from "./support/console-process.ts";
import { startConsoleProcess } from "./support/console-process.ts";

const CHROMIUM = "/usr/bin/chromium";
if (!existsSync(CHROMIUM) && process.env.CI) throw new Error(`console browser tests need ${CHROMIUM}`);

/** Characters that print as nothing, reorder text or pass for a space: none may reach the page raw. */
const SUSPECT = /[\u007F-\u009F\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]|(?! )\p{Zs}/u;

const REVERSED = "k\u202Egnp.exe";
const PLAIN = "order-1";
const SPACED = "order-1\u200B";
const TENANT = "acme\u2060";

/** Echo the input; answer with a look-alike in the body; queue a message on a look-alike topic. */
const echo = workflow("echo")
  .phase("keep", async ({ input, outbox }) => {
    await outbox.enqueue("mail\u200Bout", { to: "ops\u202Emoc.liam" });
    return { kept: input, note: "pay\u202Eredro" };
  })
  .respond(() => ({ status: 200, body: { said: REVERSED } }));

/** Names and an error with hidden characters: the run stays stuck with its error recorded. */
const lookalike = workflow("look\u200Balike", { maxAttempts: 5 })
  .phase("pre\u200Bpare", () => ({ ready: true }))
  .step("ca\u200Bll", () => {
    throw new Error("refused: acct\u200B-1\u202Eevil");
  })
  .respond(() => ({ status: 200, body: null }));

/** A wait for a signal with a look-alike name: its page shows the `engine.signal(...)` call to send it. */
const waiting = workflow("waiting")
  .phase("ask", () => ({ asked: true }))
  .waitFor("con\u200Bfirmed")
  .respond(() => ({ status: 200, body: null }));

const seeded = useClonedDatabase("idempo_console_lookalike", {
  pool: 2,
  prepare: async (db) => {
    const e = createEngine({ db });
    for (const key of [REVERSED, PLAIN, SPACED]) {
      await e.runOnce(echo, { tenantId: TENANT, key, input: { name: "ev\u202Eil", key } });
    }
    await e.runOnce(waiting, { tenantId: TENANT, key: "pay\u202E1", input: {} });
    await expect(e.runOnce(lookalike, { tenantId: TENANT, key: "stuck\u00A0one", input: {} })).rejects.toThrow(
      /refused/,
    );
  },
});

const ENTITIES: Record<string, string> = { "&quot;": '"', "&#39;": "'", "&lt;": "<", "&gt;": ">", "&amp;": "&" };

/** The text of an HTML page as a browser would show it: tags (and so attributes) dropped, entities decoded. */
function shownText(page: string): string {
  return page.replace(/<[^>]*>/g, " ").replace(/&(?:quot|#39|lt|gt|amp);/g, (e) => ENTITIES[e] ?? e);
}

describe("look-alike strings in the console", () => {
  let target: ConsoleProcess;
  let cookie: string;
  let engine: Engine;
  const paths = () => [
    "/runs?view=recent",
    "/runs?view=stuck",
    "/runs?view=completed",
    "/outbox",
    "/runs?view=suspended",
    ...[REVERSED, PLAIN, SPACED, "stuck\u00A0one", "pay\u202E1"].map(
      (key) => `/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent(key)}`,
    ),
    `/actions/cancel/${encodeURIComponent(TENANT)}/${encodeURIComponent("stuck\u00A0one")}`,
    `/actions/retry-from/${encodeURIComponent(TENANT)}/${encodeURIComponent("stuck\u00A0one")}?item=${encodeURIComponent("ca\u200Bll")}`,
    `/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent("no\u200Bsuch")}`,
  ];

  beforeAll(async () => {
    engine = createEngine({ db: seeded.db });
    target = await startConsoleProcess(seeded.url, ["--allow-actions"]);
    const login = await fetch(target.tokenUrl, { redirect: "manual" });
    cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] as string;
  });
  afterAll(async () => {
    await target?.stop();
  });

  it("the rendered HTML shows no raw invisible or bidirectional character, on any page", async () => {
    for (const path of paths()) {
      const res = await fetch(`${target.url}${path}`, { headers: { cookie } });
      expect([200, 404]).toContain(res.status);
      const text = shownText(await res.text());
      expect({ path, suspect: SUSPECT.exec(text)?.[0] }).toEqual({ path, suspect: undefined });
    }
  });

  it("the rendered HTML shows each look-alike escaped, as the CLI prints it", async () => {
    const html = async (path: string) =>
      shownText(await (await fetch(`${target.url}${path}`, { headers: { cookie } })).text());
    const recent = await html("/runs?view=recent");
    for (const shown of ["k\\u202Egnp.exe", "order-1\\u200B", "acme\\u2060", "look\\u200Balike"]) {
      expect(recent).toContain(shown);
    }
    const reversed = await html(`/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent(REVERSED)}`);
    expect(reversed).toContain('"said": "k\\u202Egnp.exe"');
    expect(reversed).toContain('"name": "ev\\u202Eil"');
    expect(reversed).toContain('"note": "pay\\u202Eredro"');
    const stuck = await html(`/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent("stuck\u00A0one")}`);
    expect(stuck).toContain("stuck\\u00A0one");
    expect(stuck).toContain("refused: acct\\u200B-1\\u202Eevil");
    expect(stuck).toContain("ca\\u200Bll");
    const pay = await html(`/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent("pay\u202E1")}`);
    expect(pay).toContain('engine.signal("acme\\u2060", "pay\\u202E1", "con\\u200Bfirmed", payload)');
    const outbox = await html("/outbox");
    expect(outbox).toContain("mail\\u200Bout");
  });

  it("idempo keys show prints the stored JSON escaped the same way", async () => {
    const res = await idempo(["keys", "show", TENANT, REVERSED, "--show-state", "--show-response"], {
      DATABASE_URL: seeded.url,
    });
    expect(res.code).toBe(0);
    expect(SUSPECT.exec(res.stdout)?.[0]).toBeUndefined();
    expect(res.stdout).toContain('"said": "k\\u202Egnp.exe"');
    expect(res.stdout).toContain('"note": "pay\\u202Eredro"');
  });

  describe.skipIf(!existsSync(CHROMIUM))("in a browser", () => {
    let browser: Browser;
    let page: Page;
    beforeAll(async () => {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
      });
      page = await browser.newPage();
      await page.goto(target.tokenUrl);
    });
    afterAll(async () => {
      await browser?.close();
    });

    it("order-1 and order-1 with a zero-width space read differently, and each link opens its own run", async () => {
      await page.goto(`${target.url}/runs?view=completed`);
      const links = await page.locator("td.key a").allInnerTexts();
      expect(links.sort()).toEqual(["k\\u202Egnp.exe", "order-1", "order-1\\u200B"].sort());
      for (const text of await page.locator("body").allInnerTexts()) expect(SUSPECT.exec(text)?.[0]).toBeUndefined();
      await page.locator("td.key a", { hasText: "order-1\\u200B" }).click();
      await page.waitForURL(/order-1/);
      expect(await page.locator("h1").first().textContent()).toBe("order-1\\u200B");
      expect(await page.title()).toContain("order-1\\u200B");
      expect(decodeURIComponent(new URL(page.url()).pathname)).toBe(`/runs/${TENANT}/${SPACED}`);
    });

    it("no page shows a raw invisible or bidirectional character to the eye", async () => {
      for (const path of paths()) {
        await page.goto(`${target.url}${path}`);
        // What is rendered, as the eye sees it: innerText, not textContent, which also holds text no one sees.
        // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is the point of this check
        const text = `${await page.title()}\n${await page.locator("body").innerText()}`;
        expect({ path, suspect: SUSPECT.exec(text)?.[0] }).toEqual({ path, suspect: undefined });
      }
    });

    it("a verb on a look-alike key acts on that exact run", async () => {
      await page.goto(`${target.url}/runs/${encodeURIComponent(TENANT)}/${encodeURIComponent("stuck\u00A0one")}`);
      await page.getByRole("button", { name: "Cancel run" }).click();
      expect(await page.locator("article p").first().textContent()).toContain("acme\\u2060/stuck\\u00A0one");
      await page.getByRole("button", { name: "Confirm: Cancel run" }).click();
      await page.waitForURL(/done=cancel/);
      expect((await engine.inspect(TENANT, "stuck\u00A0one"))?.status).toBe("completed");
      expect(await engine.inspect(TENANT, "stuck one")).toBeNull();
    });
  });
});
