/**
 * The console's routes (Hono). Everything is server-rendered HTML with
 * Hono's `html` template, which escapes every interpolated value: tenant
 * ids, keys, state and error texts are client input and are shown as text,
 * and each stored string goes through `visible` (JSON through `visibleJson`)
 * first, so an invisible or bidirectional character shows as its escape.
 * Every route sits behind the access guard (host names and the start-up
 * token); verbs exist only when the console was started with actions allowed.
 */
import type { Engine, ListKeysOptions, OverviewWindow, RunRecord } from "@idempo/core";
import { IdempoError } from "@idempo/core";
import type { Context } from "hono";
import { Hono } from "hono";
import { html } from "hono/html";
import { factsOf } from "../delivered-signals.js";
import type { SuspensionFacts } from "../format/diagnosis.js";
import { visible } from "../format/visible.js";
import { tokenMatches } from "./auth.js";
import { confirmPage } from "./confirm-page.js";
import type { Access } from "./guard.js";
import { accessGuard } from "./guard.js";
import { page, stylesheet } from "./layout.js";
import { outboxPage } from "./outbox-page.js";
import { overviewPage } from "./overview-page.js";
import { outboxRetryPath, runPath, scheduleActionPath } from "./paths.js";
import { runAction } from "./run-actions.js";
import { runPage } from "./run-page.js";
import type { ViewName } from "./runs-page.js";
import { runsPage, VIEWS } from "./runs-page.js";
import { SCHEDULE_ACTIONS, scheduleAction } from "./schedule-actions.js";
import { schedulesPage } from "./schedules-page.js";
import { tombstonePage } from "./tombstone-page.js";

/** What the routes need. */
export interface ConsoleContext {
  readonly engine: Engine;
  /** The database clock now: leases and ages are shown on it. */
  readonly clock: () => Promise<Date>;
  /**
   * Which awaited signals of these records have arrived, by tenant and key
   * (see `deliveredSignals`): a due wait's retry merges the signal or times out.
   */
  readonly signals: (records: readonly RunRecord[]) => Promise<ReadonlyMap<string, SuspensionFacts>>;
  /** Whether verbs are offered at all (`--allow-actions`). */
  readonly actions: boolean;
  /** Where an unexpected error of a request goes (the page itself says only that one happened). */
  readonly report: (error: unknown) => void;
}

const PAGE_SIZE = 50;
/** Next ticks per schedule the overview asks for: the engine's most; a denser schedule's row says it goes on. */
const OVERVIEW_TICKS = 1_000;

/** The Hono application of the console, behind `access` (see guard.ts). */
export function consoleApp(ctx: ConsoleContext, access: Access): Hono {
  const app = new Hono();
  const { actions } = ctx;
  /**
   * A verb request is allowed when the form field carries the token too (the
   * guard has checked the cookie): a form another site posts cannot know it.
   */
  const mayAct = async (c: Context): Promise<Record<string, string> | null> => {
    const form = await c.req.parseBody();
    const fields = Object.fromEntries(
      Object.entries(form).filter((e): e is [string, string] => typeof e[1] === "string"),
    );
    return tokenMatches(access.token, fields.token) ? fields : null;
  };

  app.use(accessGuard(access));

  app.get("/assets/console.css", (c) => c.body(stylesheet(), 200, { "content-type": "text/css; charset=utf-8" }));

  app.get("/", (c) => c.redirect("/runs?view=stuck"));

  app.get("/runs", async (c) => {
    const viewParam = c.req.query("view") ?? "stuck";
    const view: ViewName = viewParam in VIEWS ? (viewParam as ViewName) : "stuck";
    const tenant = c.req.query("tenant") ?? "";
    const workflow = c.req.query("workflow") ?? "";
    const cursor = c.req.query("cursor");
    const filter: ListKeysOptions = {
      ...VIEWS[view].filter,
      limit: PAGE_SIZE,
      ...(tenant ? { tenantId: tenant } : {}),
      ...(workflow ? { workflow } : {}),
      ...(cursor ? { cursor } : {}),
    };
    const [result, now] = await Promise.all([ctx.engine.listKeys(filter), ctx.clock()]);
    const signals = await ctx.signals(result.items);
    const next = result.nextCursor
      ? `/runs?${new URLSearchParams({ view, tenant, workflow, cursor: result.nextCursor }).toString()}`
      : null;
    const facts = (r: RunRecord) => factsOf(signals, r);
    const body = runsPage({ view, tenant, workflow, items: result.items, nextHref: next, now, facts });
    return c.html(page(VIEWS[view].title, `/runs?view=${view}`, body));
  });

  app.get("/runs/:tenant/:key", async (c) => {
    const { tenant, key } = c.req.param();
    const [record, now] = await Promise.all([ctx.engine.inspect(tenant, key), ctx.clock()]);
    if (!record)
      return c.html(
        page("Not found", "", html`<h1>No record</h1><p>No key ${visible(key)} in tenant ${visible(tenant)}.</p>`),
        404,
      );
    if (record.status === "expired") return c.html(page(visible(key), "", tombstonePage(record)));
    const facts = factsOf(await ctx.signals([record]), record);
    const done = c.req.query("done");
    const verb = done ? runAction(done) : undefined;
    return c.html(
      page(visible(key), "", runPage(record, now, actions, facts), verb ? `${verb.label}: done.` : undefined),
    );
  });

  app.get("/overview", async (c) => {
    const window: OverviewWindow = c.req.query("window") === "day" ? "day" : "hour";
    const [overview, schedules] = await Promise.all([
      ctx.engine.overview({ window }),
      ctx.engine.listScheduleTicks({ next: OVERVIEW_TICKS, last: 0 }),
    ]);
    return c.html(page("Overview", "/overview", overviewPage(overview, schedules, OVERVIEW_TICKS)));
  });

  app.get("/schedules", async (c) => {
    const [schedules, now] = await Promise.all([ctx.engine.listScheduleTicks({ next: 5, last: 5 }), ctx.clock()]);
    const verb = scheduleAction(c.req.query("done") ?? "");
    const flash = verb ? `${verb.label}: done.` : undefined;
    return c.html(page("Schedules", "/schedules", schedulesPage(schedules, now, actions), flash));
  });

  app.get("/outbox", async (c) => {
    const [pending, dead] = await Promise.all([
      ctx.engine.listOutbox({ status: "pending", limit: PAGE_SIZE }),
      ctx.engine.listOutbox({ status: "dead", limit: PAGE_SIZE }),
    ]);
    const done = c.req.query("done") === "outbox-retry" ? "Message requeued." : undefined;
    return c.html(page("Outbox", "/outbox", outboxPage(pending, dead, actions), done));
  });

  if (actions) {
    app.get("/actions/outbox-retry/:tenant/:messageId", (c) => {
      const { tenant, messageId } = c.req.param();
      const path = outboxRetryPath(tenant, messageId);
      return c.html(
        page(
          "Retry message",
          "/outbox",
          confirmPage({
            title: "Retry message",
            question: visible(
              `Put outbox message ${messageId} of tenant ${tenant} back in line now, with a fresh attempt budget. The relay delivers it again with the same delivery key.`,
            ),
            action: path,
            fields: {},
            cancelHref: "/outbox",
            token: access.token,
          }),
        ),
      );
    });
    app.post("/actions/outbox-retry/:tenant/:messageId", async (c) => {
      if (!(await mayAct(c))) return c.text("action token missing or wrong", 403);
      const { tenant, messageId } = c.req.param();
      await ctx.engine.retryOutbox(tenant, messageId);
      return c.redirect("/outbox?done=outbox-retry", 303);
    });
    const findSchedule = async (name: string) => (await ctx.engine.listSchedules()).find((s) => s.name === name);
    for (const action of SCHEDULE_ACTIONS) {
      const route = `/actions/schedule-${action.verb}/:name`;
      app.get(route, async (c) => {
        const schedule = await findSchedule(c.req.param("name") ?? "");
        if (!schedule) return c.text("no such schedule", 404);
        return c.html(
          page(
            action.label,
            "/schedules",
            confirmPage({
              title: action.label,
              question: visible(action.question(schedule)),
              action: scheduleActionPath(action.verb, schedule.name),
              fields: {},
              cancelHref: "/schedules",
              token: action.applies(schedule) ? access.token : null,
              subject: "schedule",
            }),
          ),
        );
      });
      app.post(route, async (c) => {
        if (!(await mayAct(c))) return c.text("action token missing or wrong", 403);
        const schedule = await findSchedule(c.req.param("name") ?? "");
        if (!schedule) return c.text("no such schedule", 404);
        if (!action.applies(schedule)) return c.text(`${action.label} does not apply to this schedule now`, 409);
        await action.perform(ctx.engine, schedule.name);
        return c.redirect(`/schedules?done=schedule-${action.verb}`, 303);
      });
    }
    app.get("/actions/:verb/:tenant/:key", async (c) => {
      const { verb, tenant, key } = c.req.param();
      const action = runAction(verb);
      const record = action ? await ctx.engine.inspect(tenant, key) : null;
      // A tombstone has no run to act on.
      if (!action || !record || record.status === "expired") return c.text("no such action or run", 404);
      const item = c.req.query("item");
      if (action.items && (item === undefined || !action.items(record).includes(item))) {
        return c.text("choose an item of the run's workflow", 400);
      }
      return c.html(
        page(
          action.label,
          "",
          confirmPage({
            title: action.label,
            question: visible(action.question(record, item)),
            action: c.req.path,
            fields: item === undefined ? {} : { item },
            cancelHref: runPath(tenant, key),
            token: action.applies(record) ? access.token : null,
          }),
        ),
      );
    });
    app.post("/actions/:verb/:tenant/:key", async (c) => {
      const form = await mayAct(c);
      if (!form) return c.text("action token missing or wrong", 403);
      const { verb, tenant, key } = c.req.param();
      const action = runAction(verb);
      const record = action ? await ctx.engine.inspect(tenant, key) : null;
      // A tombstone has no run to act on.
      if (!action || !record || record.status === "expired") return c.text("no such action or run", 404);
      if (!action.applies(record)) return c.text(`${action.label} does not apply to this run now`, 409);
      const item = form.item;
      if (action.items && (item === undefined || !action.items(record).includes(item))) {
        return c.text("choose an item of the run's workflow", 400);
      }
      await action.perform(ctx.engine, record, item);
      return c.redirect(`${runPath(tenant, key)}?done=${encodeURIComponent(action.name)}`, 303);
    });
  }

  app.onError((error, c) => {
    if (error instanceof IdempoError && error.httpStatus < 500) {
      return c.html(
        page("Refused", "", html`<h1>Refused</h1><p>${visible(error.message)}</p>`),
        error.httpStatus as 400,
      );
    }
    // Never a stack trace on the page: the operator's terminal has the details.
    ctx.report(error);
    return c.html(page("Error", "", html`<h1>Something went wrong</h1><p>See the console's terminal.</p>`), 500);
  });
  return app;
}
