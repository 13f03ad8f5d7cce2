/**
 * The overview and schedules pages in a real browser (Playwright driving
 * the system's Chromium) against a shop's seeded day (see
 * support/overview-seed.ts): the figures on the page are the engine's
 * (`overview`, `listScheduleTicks`) and the seed's fixed counts, and a
 * schedule is paused and resumed through the page. With
 * CONSOLE_SCREENSHOTS set, it refreshes the docs' screenshots.
 */
import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import type { Browser, Page } from "playwright-core";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import type { ConsoleProcess } from "./support/console-process.ts";
import { startConsoleProcess } from "./support/console-process.ts";
import { SHOP, seedShop } from "./support/overview-seed.ts";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;

if (!existsSync(CHROMIUM)) {
  const message = `console browser tests need ${CHROMIUM} (apt-get install -y chromium)`;
  if (process.env.CI) throw new Error(message);
  console.warn(`\n*** SKIPPED: ${message} ***\n`);
}

const shop = useClonedDatabase("idempo_console_overview", { pool: 6, prepare: seedShop });
const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

describe.skipIf(!existsSync(CHROMIUM))("the overview and schedules pages in a browser", () => {
  let browser: Browser;
  let consoleProcess: ConsoleProcess;
  let engine: Engine;

  beforeAll(async () => {
    engine = createEngine({ db: shop.db });
    [consoleProcess, browser] = await Promise.all([
      startConsoleProcess(shop.url, ["--allow-actions"]),
      chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
      }),
    ]);
    if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), consoleProcess?.stop()]);
  });

  async function open(path: string): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(consoleProcess.tokenUrl);
    await page.goto(`${consoleProcess.url}${path}`);
    return page;
  }
  async function shot(page: Page, name: string) {
    if (SCREENSHOTS)
      await page.screenshot({ path: fileURLToPath(new URL(`${name}.png`, `file://${SCREENSHOTS}/`)), fullPage: true });
  }
  const tiles = (page: Page) =>
    page
      .locator("li[data-tile]")
      .evaluateAll((els) =>
        Object.fromEntries(
          els.map((e) => [e.getAttribute("data-tile"), Number(e.querySelector("[data-value]")?.textContent)]),
        ),
      );
  /** Each series of a chart as drawn: name and its values. */
  const series = (page: Page, chart: string) =>
    page
      .locator(`svg[data-chart="${chart}"] g[data-series]`)
      .evaluateAll((gs) =>
        Object.fromEntries(
          gs.map((g) => [g.getAttribute("data-series"), (g.getAttribute("data-values") ?? "").split(",").map(Number)]),
        ),
      );

  it("the overview shows the engine's figures: counts, charts, durations and next ticks, for the hour and the day", async () => {
    // The same figures read before and after the page: no run crossed the window's start meanwhile.
    let page: Page | undefined;
    let hour = await engine.overview({ window: "hour" });
    for (let tries = 0; tries < 3; tries++) {
      await page?.close();
      page = await open("/overview");
      const after = await engine.overview({ window: "hour" });
      const same =
        sum(after.started) === sum(hour.started) && sum(after.finished.succeeded) === sum(hour.finished.succeeded);
      hour = after;
      if (same) break;
    }
    if (!page) throw new Error("no page");
    expect(await tiles(page)).toEqual({
      started: sum(hour.started),
      succeeded: sum(hour.finished.succeeded),
      failed: SHOP.failedInHour,
      errored: 0,
      canceled: SHOP.canceled,
      parked: SHOP.parked,
      stuck: SHOP.stuck,
      "in-flight": 0,
      suspended: SHOP.suspended,
      "outbox-pending": SHOP.outboxPending,
      "outbox-dead": SHOP.outboxDead,
    });
    // 30 + 14 + 5 + 4 runs of the plan, 2 parked, 2 stuck, 2 trials, 2 payments, and the schedules' ticks on top.
    expect(sum(hour.started)).toBeGreaterThan(61);
    const finished = await series(page, "finished");
    expect(sum(finished.succeeded ?? [])).toBe(sum(hour.finished.succeeded));
    expect(sum(finished.failed ?? [])).toBe(SHOP.failedInHour);
    expect(finished.succeeded).toHaveLength(60);
    const stopped = await series(page, "parked-stuck");
    // One parking is 9 hours old: in every bucket of the hour; the others came 41 and 13 minutes ago.
    expect([stopped.parked?.[0], stopped.parked?.at(-1)]).toEqual([1, SHOP.parked]);
    expect([stopped.stuck?.[0], stopped.stuck?.at(-1)]).toEqual([0, SHOP.stuck]);
    const outbox = await series(page, "outbox");
    expect(outbox.backlog?.at(-1)).toBe(SHOP.outboxPending + SHOP.outboxDead);
    // The outage 24-32 minutes ago held receipts back: the backlog was higher then than at the window's start.
    expect(Math.max(...(outbox.backlog ?? []))).toBeGreaterThan(outbox.backlog?.[0] ?? 0);
    const ship = page.locator('g[data-row="item:fulfilment:step:ship"]');
    const p50 = Number(await ship.getAttribute("data-p50"));
    expect(p50).toBeGreaterThanOrEqual(20);
    expect(Number(await ship.getAttribute("data-count"))).toBe(14);
    expect(await page.locator('g[data-row="workflow:checkout"]').count()).toBe(1);
    expect(
      Number(await page.locator('g[data-schedule="heartbeat"]').getAttribute("data-ticks")),
    ).toBeGreaterThanOrEqual(59);
    expect(await page.locator('g[data-schedule="weekly-cleanup"]').textContent()).toContain("paused");
    await shot(page, "overview");

    await page.getByRole("link", { name: "Last day" }).click();
    await page.waitForURL(/window=day/);
    const day = await tiles(page);
    expect(day.failed).toBe(SHOP.failedInDay);
    expect(day.started).toBeGreaterThan(sum(hour.started) + 50);
    expect((await series(page, "started")).started).toHaveLength(96);
    await page.close();
  });

  it("the schedules page lists next ticks and the last ticks' runs; a schedule is paused and resumed through it", async () => {
    const page = await open("/schedules");
    const stored = await engine.listScheduleTicks({ next: 5, last: 5 });
    const shown = await page.locator("tr[data-schedule]").evaluateAll((rows) =>
      rows.map((r) => ({
        name: r.getAttribute("data-schedule"),
        next: [...r.querySelectorAll("[data-next]")].map((e) => e.getAttribute("data-next")),
        last: [...r.querySelectorAll("[data-tick]")].map((e) => [
          e.getAttribute("data-tick"),
          e.getAttribute("data-run"),
        ]),
      })),
    );
    expect(shown).toEqual(
      stored.map((s) => ({
        name: s.schedule.name,
        next: s.next.map((d) => d.toISOString()),
        last: s.last.map((t) => [t.at.toISOString(), t.run ? (t.run.outcome ?? t.run.status) : "none"]),
      })),
    );
    const sync = shown.find((s) => s.name === "sync-every-5m");
    expect(sync?.last.map(([, run]) => run)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded", "succeeded"]);
    // catchUp 'latest': of the ticks missed, only the latest started a run.
    const digest = shown.find((s) => s.name === "hourly-digest")?.last.map(([, run]) => run) ?? [];
    expect(digest.filter((r) => r === "none").length).toBeGreaterThanOrEqual(2);
    expect(shown.find((s) => s.name === "weekly-cleanup")?.next).toEqual([]);
    await shot(page, "schedules");

    const row = page.locator('tr[data-schedule="sync-every-5m"]');
    await row.getByRole("button", { name: "Pause…" }).click();
    expect(await page.getByText("the ticks of the pause are skipped").count()).toBe(1);
    // A form posted without the token changes nothing.
    const forged = await page.request.post(`${consoleProcess.url}/actions/schedule-pause/sync-every-5m`, {
      form: { token: "guess" },
    });
    expect(forged.status()).toBe(403);
    expect((await engine.listSchedules()).find((s) => s.name === "sync-every-5m")?.paused).toBe(false);
    await page.getByRole("button", { name: "Confirm: Pause schedule" }).click();
    await page.waitForURL(/done=schedule-pause/);
    expect(await page.getByRole("status").textContent()).toContain("Pause schedule: done.");
    expect((await engine.listSchedules()).find((s) => s.name === "sync-every-5m")?.paused).toBe(true);
    await row.getByRole("button", { name: "Resume…" }).click();
    await page.getByRole("button", { name: "Confirm: Resume schedule" }).click();
    await page.waitForURL(/done=schedule-resume/);
    const resumed = (await engine.listSchedules()).find((s) => s.name === "sync-every-5m");
    expect(resumed?.paused).toBe(false);
    expect(resumed?.nextTickAt?.getTime()).toBeGreaterThan(Date.now() - 60_000);
    await page.close();
  });
});
