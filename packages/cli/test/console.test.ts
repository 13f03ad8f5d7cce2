/**
 * The web console in a real browser (Playwright driving the system's
 * Chromium) against a database seeded by real runs: two tenants, a
 * completed checkout, one stuck in its charge step, one whose process died
 * with its lease still running, a key containing markup, a run sleeping
 * and one waiting for a signal.
 */
import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import type { Browser, Page } from "playwright-core";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { payment, trial } from "./fixtures/durable-workflows.ts";
import type { ConsoleProcess } from "./support/console-process.ts";
import { startConsoleProcess } from "./support/console-process.ts";

const CHROMIUM = "/usr/bin/chromium";
const SCRIPT_KEY = "<script>window.__pwned=1</script>";
/** Set to a folder to refresh the screenshots kept in the docs. */
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;

if (!existsSync(CHROMIUM)) {
  const message = `console browser tests need ${CHROMIUM} (apt-get install -y chromium)`;
  if (process.env.CI) throw new Error(message);
  console.warn(`\n*** SKIPPED: ${message} ***\n`);
}

async function crashAt(engine: Engine, point: string, tenantId: string, key: string, amountCents: number) {
  setFaultHook(engine, (p) => {
    if (p === point) throw new CrashSignal(p);
  });
  await expect(engine.runOnce(checkout, { tenantId, key, input: { amountCents } })).rejects.toBeInstanceOf(CrashSignal);
  setFaultHook(engine, undefined);
}

/** A run whose phase returns a value JSON cannot store: parked at once. */
const poison = workflow("poison")
  .phase("compute", () => ({ total: 10n as unknown as number }))
  .respond(() => ({ status: 200, body: null }));

const seeded = useClonedDatabase("idempo_console", {
  pool: 4,
  prepare: async (db) => {
    const normal = createEngine({ db });
    const short = createEngine({ db, leaseMs: 200 });
    const long = createEngine({ db, leaseMs: 600_000 });
    await normal.runOnce(checkout, { tenantId: "acme", key: "order-1001", input: { amountCents: 1200 } });
    await normal.runOnce(checkout, { tenantId: "globex", key: "order-1001", input: { amountCents: 800 } });
    await crashAt(short, "called:step:charge", "acme", "order-1002", 4500);
    await crashAt(short, "after:phase:create_order", "acme", SCRIPT_KEY, 100);
    await crashAt(long, "after:phase:create_order", "globex", "order-2001", 300);
    await expect(normal.runOnce(poison, { tenantId: "acme", key: "poison-1", input: {} })).rejects.toThrow();
    await normal.runOnce(trial, { tenantId: "acme", key: "trial-1", input: { sleepMs: 3_600_000 } });
    await normal.runOnce(payment, { tenantId: "globex", key: "pay-1", input: {} });
    // Wait until the short leases have run out by the database clock.
    for (let i = 0; i < 200; i++) {
      const page = await normal.listKeys({ stuck: true });
      if (page.items.length >= 2) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  },
});

describe.skipIf(!existsSync(CHROMIUM))("idempo console in a browser", () => {
  let browser: Browser;
  let readOnly: ConsoleProcess;
  let withActions: ConsoleProcess;
  let engine: Engine;
  const alerts: string[] = [];

  beforeAll(async () => {
    engine = createEngine({ db: seeded.db, workflows: [payment] });
    [readOnly, withActions, browser] = await Promise.all([
      startConsoleProcess(seeded.url),
      startConsoleProcess(seeded.url, ["--allow-actions"]),
      chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
      }),
    ]);
    if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), readOnly?.stop(), withActions?.stop()]);
  });

  /** A new browser page on `path`, logged in to `target` first (it opened the token address). */
  async function open(path: string, target = readOnly, login = true): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on("dialog", (d) => {
      alerts.push(d.message());
      void d.dismiss();
    });
    if (login) await page.goto(target.tokenUrl);
    await page.goto(`${target.url}${path}`);
    return page;
  }
  async function shot(page: Page, name: string) {
    if (SCREENSHOTS)
      await page.screenshot({ path: fileURLToPath(new URL(`${name}.png`, `file://${SCREENSHOTS}/`)), fullPage: true });
  }

  it("lists the stuck runs of both tenants, and shows the markup key as text", async () => {
    const page = await open("/");
    expect(new URL(page.url()).pathname).toBe("/runs");
    const keys = await page.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-key")));
    expect(keys.sort()).toEqual([SCRIPT_KEY, "order-1002"].sort());
    await expect(page.locator("td.key a", { hasText: SCRIPT_KEY }).count()).resolves.toBe(1);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator("body script").count()).toBe(0);
    await shot(page, "stuck");
    await page.close();
  });

  it("filters by tenant and status", async () => {
    const page = await open("/runs?view=recent&tenant=globex");
    const rows = await page.locator("tbody tr td:first-child").allTextContents();
    expect(rows).toEqual(["globex", "globex", "globex"]);
    await page.goto(`${readOnly.url}/runs?view=completed`);
    const completed = await page.locator("tbody tr").evaluateAll((r) => r.map((x) => x.getAttribute("data-key")));
    expect(completed).toEqual(["order-1001", "order-1001"]);
    await page.close();
  });

  it("shows a stuck run's timeline as inspect records it, and what a retry would do", async () => {
    const record = await engine.inspect("acme", "order-1002");
    const page = await open("/runs/acme/order-1002");
    const entries = await page
      .locator("svg.timeline g[data-entry]")
      .evaluateAll((gs) => gs.map((g) => [g.getAttribute("data-entry"), g.getAttribute("data-outcome")]));
    expect(entries).toEqual(record?.history?.map((h) => [`${h.kind}:${h.name}:${h.attempt}`, h.outcome]));
    expect(entries).toEqual([
      ["phase:create_order:1", "succeeded"],
      ["step:charge:1", "started"],
    ]);
    const forecast = await page.getByTestId("forecast").textContent();
    expect(forecast).toContain("take over as attempt 2 and resume after create_order");
    expect(forecast).toContain("call step charge again with the same derived key");
    expect(await page.getByText("In doubt: step").count()).toBe(1);
    await shot(page, "run-stuck");
    await page.close();
  });

  it("shows a completed run's stored response, and the markup key's page as text", async () => {
    const page = await open("/runs/acme/order-1001");
    const body = JSON.parse((await page.getByTestId("response").textContent()) ?? "null");
    expect(body).toEqual((await engine.inspect("acme", "order-1001"))?.response?.body);
    expect(await page.getByTestId("forecast").textContent()).toContain("replay the stored 201 response");
    await page.goto(`${readOnly.url}/runs/acme/${encodeURIComponent(SCRIPT_KEY)}`);
    expect(await page.locator("h1").first().textContent()).toBe(SCRIPT_KEY);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    await page.close();
  });

  it("the suspended page says what each run waits for and when it wakes", async () => {
    const page = await open("/runs?view=suspended");
    const cells = await page.locator("tbody tr").evaluateAll((rows) =>
      rows.map((r) => {
        const w = r.querySelector("td.waits-for");
        return {
          key: r.getAttribute("data-key"),
          kind: w?.getAttribute("data-wait-kind"),
          name: w?.getAttribute("data-wait-name"),
          wakeAt: w?.getAttribute("data-wake-at"),
          text: w?.textContent?.replace(/\s+/g, " ").trim(),
        };
      }),
    );
    const [sleeping, waiting] = await Promise.all([
      engine.inspect("acme", "trial-1"),
      engine.inspect("globex", "pay-1"),
    ]);
    expect(cells).toEqual([
      {
        key: "pay-1",
        kind: "signal",
        name: "confirmed",
        wakeAt: waiting?.wakeAt?.toISOString(),
        text: expect.stringMatching(/^signal confirmed wakes in 6d 23h · \d{4}-[\d-]+T[\d:]+Z$/),
      },
      {
        key: "trial-1",
        kind: "sleep",
        name: "cool_off",
        wakeAt: sleeping?.wakeAt?.toISOString(),
        text: expect.stringMatching(/^sleep cool_off wakes in (\d+m|1h) · \d{4}-[\d-]+T[\d:]+Z$/),
      },
    ]);
    expect(await page.locator("thead th", { hasText: "waits for" }).count()).toBe(1);
    await shot(page, "suspended");
    await page.close();
  });

  it("a sleeping run's timeline shows the sleep, as inspect records it, and the retry's 409", async () => {
    const record = await engine.inspect("acme", "trial-1");
    const page = await open("/runs/acme/trial-1");
    const entries = await page
      .locator("svg.timeline g[data-entry]")
      .evaluateAll((gs) => gs.map((g) => [g.getAttribute("data-entry"), g.getAttribute("data-outcome")]));
    expect(entries).toEqual(record?.history?.map((h) => [`${h.kind}:${h.name}:${h.attempt}`, h.outcome]));
    expect(entries).toEqual([
      ["phase:start:1", "succeeded"],
      ["sleep:cool_off:1", "started"],
    ]);
    expect(await page.locator('g[data-entry="sleep:cool_off:1"] rect').getAttribute("fill")).toBe("#6366f1");
    expect(await page.locator('g[data-entry="sleep:cool_off:1"]').textContent()).toContain("sleeping");
    expect(await page.getByTestId("waits-for").textContent()).toBe("sleep cool_off");
    expect(await page.getByTestId("wakes").textContent()).toMatch(/^in (\d+m|1h) at \S+Z$/);
    expect(await page.getByTestId("forecast").textContent()).toMatch(
      /^409 key_in_progress with retryAfterMs \d+ \((\d+m|1h)\): the sleep cool_off wakes at \S+Z; then a worker or the next retry resumes it after cool_off: next phase finish$/,
    );
    await page.close();
  });

  it("a run waiting for a signal: the wait in its timeline, the signal to send, and what the signal changes", async () => {
    const page = await open("/runs/globex/pay-1");
    const entries = await page
      .locator("svg.timeline g[data-entry]")
      .evaluateAll((gs) => gs.map((g) => [g.getAttribute("data-entry"), g.getAttribute("data-outcome")]));
    expect(entries).toEqual([
      ["phase:authorise:1", "succeeded"],
      ["wait:confirmed:1", "started"],
    ]);
    expect(await page.locator('g[data-entry="wait:confirmed:1"]').textContent()).toContain("waiting for the signal");
    expect(await page.getByTestId("waits-for").textContent()).toBe(
      'signal confirmed · send it with engine.signal("globex", "pay-1", "confirmed", payload)',
    );
    expect(await page.getByTestId("forecast").textContent()).toContain("until the signal confirmed arrives");
    await shot(page, "run-waiting");
    await engine.signal("globex", "pay-1", "confirmed", { by: "provider" });
    await page.reload();
    expect(await page.getByTestId("waits-for").textContent()).toBe("signal confirmed (arrived)");
    expect(await page.getByTestId("forecast").textContent()).toContain(
      "the signal confirmed has arrived; merge its payload into state as confirmed, next phase capture",
    );
    const done = await engine.runOnce(payment, { tenantId: "globex", key: "pay-1", input: {} });
    expect(done).toMatchObject({ status: 201, body: { captured: "auth_pay-1" } });
    await page.reload();
    const after = await page
      .locator("svg.timeline g[data-entry]")
      .evaluateAll((gs) => gs.map((g) => [g.getAttribute("data-entry"), g.getAttribute("data-outcome")]));
    expect(after).toEqual([
      ["phase:authorise:1", "succeeded"],
      ["wait:confirmed:1", "succeeded"],
      ["phase:capture:1", "succeeded"],
    ]);
    await page.close();
  });

  it("lists the outbox's pending receipts", async () => {
    const page = await open("/outbox");
    const pending = await engine.listOutbox({ status: "pending" });
    const ids = await page.locator("tr[data-message]").evaluateAll((r) => r.map((x) => x.getAttribute("data-message")));
    expect(ids.sort()).toEqual(pending.map((m) => m.messageId).sort());
    expect(ids).toHaveLength(2);
    await shot(page, "outbox");
    await page.close();
  });

  it("offers no action without --allow-actions, and refuses one sent by hand", async () => {
    const owner = (await engine.inspect("globex", "order-2001"))?.ownerToken;
    expect(owner).toEqual(expect.any(String));
    const page = await open("/runs/globex/order-2001");
    expect(await page.getByRole("button", { name: "Release lease" }).count()).toBe(0);
    expect(await page.getByText("Retry…").count()).toBe(0);
    const get = await page.request.get(`${readOnly.url}/actions/release/globex/order-2001`);
    expect(get.status()).toBe(404);
    const post = await page.request.post(`${readOnly.url}/actions/release/globex/order-2001`, { form: { token: "x" } });
    expect(post.status()).toBe(404);
    // A release would have cleared the owner token.
    expect((await engine.inspect("globex", "order-2001"))?.ownerToken).toBe(owner);
    await page.close();
  });

  it("refuses an action from a browser that never opened the token address, or a form without the token", async () => {
    const owner = (await engine.inspect("globex", "order-2001"))?.ownerToken;
    expect(owner).toEqual(expect.any(String));
    const stranger = await open("/actions/release/globex/order-2001", withActions, false);
    expect(await stranger.getByText("Token needed").count()).toBeGreaterThan(0);
    expect(await stranger.locator("form[method=post]").count()).toBe(0);
    const post = await stranger.request.post(`${withActions.url}/actions/release/globex/order-2001`, {
      form: { token: "guess" },
    });
    expect(post.status()).toBe(401);
    await stranger.close();
    // Logged in, but the form does not carry the token: what a form posted from another site looks like.
    const page = await open("/runs/globex/order-2001", withActions);
    const forged = await page.request.post(`${withActions.url}/actions/release/globex/order-2001`, {
      form: { token: "guess" },
    });
    expect(forged.status()).toBe(403);
    expect((await engine.inspect("globex", "order-2001"))?.ownerToken).toBe(owner);
    await page.close();
  });

  it("releases a dead owner's lease through the page, and the next retry takes the run over", async () => {
    const page = await open("/runs/globex/order-2001", withActions);
    expect(await page.getByTestId("forecast").textContent()).toContain("409 key_in_progress");
    await page.getByRole("button", { name: "Release lease" }).click();
    await shot(page, "confirm-release");
    await page.getByRole("button", { name: "Confirm: Release lease" }).click();
    await page.waitForURL(/done=release/);
    expect(await page.getByRole("status").textContent()).toContain("Release lease: done.");
    expect(await page.getByTestId("forecast").textContent()).toContain(
      "take over as attempt 2 and resume after create_order",
    );
    const res = await engine.runOnce(checkout, { tenantId: "globex", key: "order-2001", input: { amountCents: 300 } });
    expect(res).toMatchObject({ status: 201, replayed: false });
    const after = await engine.inspect("globex", "order-2001");
    expect(after).toMatchObject({ status: "completed", attempt: 2 });
    await page.close();
    expect(alerts).toEqual([]);
  });

  it("shows parked runs with their reason, and unparks one through the page", async () => {
    const page = await open("/runs?view=parked", withActions);
    const keys = await page.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-key")));
    expect(keys).toEqual(["poison-1"]);
    await page.goto(`${withActions.url}/runs/acme/poison-1`);
    expect(await page.getByText("Parked:").textContent()).toContain("compute");
    expect(await page.getByTestId("forecast").textContent()).toContain("RunParkedError");
    await page.getByRole("button", { name: "Unpark" }).click();
    await page.getByRole("button", { name: "Confirm: Unpark" }).click();
    await page.waitForURL(/done=unpark/);
    expect((await engine.inspect("acme", "poison-1"))?.status).toBe("in_flight");
    await page.close();
  });

  it("cancels a stuck run through the page: every retry then replays the stored 409", async () => {
    const page = await open("/runs/acme/order-1002", withActions);
    await page.getByRole("button", { name: "Cancel run" }).click();
    await page.getByRole("button", { name: "Confirm: Cancel run" }).click();
    await page.waitForURL(/done=cancel/);
    const replay = await engine.runOnce(checkout, {
      tenantId: "acme",
      key: "order-1002",
      input: { amountCents: 4500 },
    });
    expect(replay).toMatchObject({ status: 409, replayed: true, outcome: "canceled" });
    await page.close();
  });
});
