/** `idempo keys show TENANT KEY`: one key's record, timeline and what a retry would do now. */
import type { RunRecord } from "@idempo/core";
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import { deliveredSignals, factsOf } from "../delivered-signals.js";
import { OperationalError } from "../errors.js";
import type { Paint } from "../format/colour.js";
import type { Diagnosis, SuspensionFacts } from "../format/diagnosis.js";
import { describeRetry, diagnose } from "../format/diagnosis.js";
import { formatDuration } from "../format/duration.js";
import { leaseLabel, statusLabel, waitsForLabel } from "../format/key-table.js";
import { keyDetailJson } from "../format/record-json.js";
import { definitionItems } from "../format/run-items.js";
import { signalCall } from "../format/signal-call.js";
import { TABLE_WIDTH } from "../format/table.js";
import { timelineTable } from "../format/timeline.js";
import { iso, wakeTime } from "../format/times.js";
import { tombstoneJson, tombstoneView } from "../format/tombstone.js";
import { visible, visibleJson } from "../format/visible.js";
import { wrap } from "../format/wrap.js";
import type { Io } from "../io.js";
import { printJson } from "../output.js";

interface ShowOptions {
  showState?: boolean;
  showResponse?: boolean;
  json?: boolean;
}

/** `  name           value`, the value wrapped under itself within the table width. */
function field(paint: Paint, name: string, value: string): string {
  const label = `  ${paint("dim", name.padEnd(15))}`;
  return `${wrap(value, TABLE_WIDTH, label, " ".repeat(17)).join("\n")}\n`;
}

/**
 * The definition with the progress marked: done ✓, in doubt ?, next ›, suspended in … (a sleep or a wait);
 * a parallel item with its branches, `parallel notify (email | sms)`.
 */
function outline(record: RunRecord, d: Diagnosis): string {
  const items = definitionItems(record);
  const doneUntil = record.recoveryPoint === null ? -1 : items.findIndex((i) => i.name === record.recoveryPoint);
  return items
    .map((item, i) => {
      const mark =
        record.status === "suspended" && record.waitingFor?.name === item.name
          ? "…"
          : record.status === "completed" || i <= doneUntil
            ? "✓"
            : d.inDoubt?.name === item.name
              ? "?"
              : d.next?.name === item.name
                ? "›"
                : " ";
      const branches = item.branches ? ` (${item.branches.map(visible).join(" | ")})` : "";
      return `${mark} ${item.kind} ${item.name}${branches}`;
    })
    .join("  ");
}

/** The `waits for` line of a suspended run: the item, and for a signal the call that sends it. */
function waitsFor(record: RunRecord, facts: SuspensionFacts): string {
  const w = record.waitingFor;
  if (w === null) return "a worker: enqueued, not started yet";
  if (w.kind === "sleep") return `sleep ${w.name}`;
  if (w.kind === "children") return `the children of ${w.name}: the last one to complete makes this run due`;
  if (w.kind === "queued") return "a slot of its parent's map (concurrency): a sibling's completion makes it due";
  if (facts.signalDelivered) return `${waitsForLabel(record, facts)}: a worker or a retry merges it now`;
  return `signal ${w.name}: send it with ${signalCall(record, w.name)}`;
}

/** The `wakes` line: relative and absolute on the database clock, and what the time is. */
function wakes(record: RunRecord, now: Date, facts: SuspensionFacts): string {
  const kind = record.waitingFor?.kind;
  if (kind === "children" || kind === "queued") {
    const on = kind === "children" ? "when its last child completes" : "when a sibling completes";
    return record.wakeAt === null ? on : `${wakeTime(record.wakeAt, now)}: ${on}, or the wait's timeout`;
  }
  if (record.wakeAt === null) return "when the signal arrives (no timeout)";
  const what =
    record.waitingFor === null
      ? "due since enqueued"
      : record.waitingFor.kind === "sleep"
        ? "end of the sleep"
        : facts.signalDelivered
          ? "when the signal arrived"
          : "the wait's timeout";
  return `${wakeTime(record.wakeAt, now)}: ${what}`;
}

/** The human view of one key. */
function render(io: Io, record: RunRecord, d: Diagnosis, now: Date, opts: ShowOptions, facts: SuspensionFacts): void {
  const p = io.paint;
  const age = formatDuration(now.getTime() - record.createdAt.getTime());
  io.out(
    `${p("bold", `${visible(record.tenantId)} / ${visible(record.key)}`)}  ${record.workflow}  ${statusLabel(record, p)}\n\n`,
  );
  io.out(field(p, "stopped", d.stoppedAt));
  io.out(field(p, "retry now", p("bold", describeRetry(record, d))));
  io.out("\n");
  io.out(field(p, "workflow", `${record.workflow}: ${outline(record, d)}`));
  io.out(field(p, "recovery point", record.recoveryPoint ?? "none yet (nothing committed)"));
  io.out(field(p, "attempts", String(record.attempt)));
  if (record.status === "suspended") {
    io.out(field(p, "waits for", waitsFor(record, facts)));
    io.out(field(p, "wakes", wakes(record, now, facts)));
  } else if (record.status === "in_flight") {
    io.out(field(p, "lease", leaseLabel(record)));
    io.out(field(p, "owner token", record.ownerToken ?? "-"));
  } else if (record.response) {
    io.out(field(p, "response", `${record.response.status} (${record.response.outcome})`));
    io.out(
      field(
        p,
        "expires",
        record.expiresAt ? `${iso(record.expiresAt)}${record.expired ? " (past retention)" : ""}` : "-",
      ),
    );
    if (record.tombstoneUntil) io.out(field(p, "tombstone", `until ${iso(record.tombstoneUntil)}`));
  }
  if (record.parent) {
    const { key, item, index } = record.parent;
    io.out(field(p, "parent", `${visible(key)} (item ${visible(item)}, child ${index})`));
  }
  io.out(field(p, "run id", record.runId));
  io.out(field(p, "created", `${iso(record.createdAt)} (${age} ago)`));
  io.out(field(p, "updated", iso(record.updatedAt)));

  const history = record.history ?? [];
  io.out(`\n${p("bold", "Timeline")}\n`);
  if (history.length === 0) io.out("  nothing started yet\n");
  else {
    const live = record.status === "in_flight" && (record.leaseRemainingMs ?? 0) > 0;
    for (const line of timelineTable(history, now, live, p, TABLE_WIDTH - 2, record.status === "suspended")
      .trimEnd()
      .split("\n")) {
      io.out(`  ${line}\n`);
    }
  }

  const children = record.children ?? [];
  if (children.length > 0) {
    io.out(`\n${p("bold", "Children")}\n`);
    for (const c of children) {
      const how = c.outcome ? `${c.status} (${c.outcome})` : c.status;
      io.out(`  ${`${visible(c.item)}[${c.index}]`.padEnd(16)} ${visible(c.key)}  ${c.workflow}  ${how}\n`);
    }
  }

  io.out("\n");
  if (opts.showState) {
    io.out(`${p("bold", "Input")}\n${indentJson(record.input)}\n${p("bold", "State")}\n${indentJson(record.state)}\n`);
  }
  if (opts.showResponse && record.response) {
    io.out(`${p("bold", "Response body")}\n${indentJson(record.response.body)}\n`);
  }
  const hidden = [
    opts.showState ? undefined : "input and state (--show-state)",
    opts.showResponse || !record.response ? undefined : "response body (--show-response)",
  ].filter((h) => h !== undefined);
  if (hidden.length > 0) io.out(p("dim", `hidden: ${hidden.join(", ")}\n`));
}

function indentJson(value: unknown): string {
  return visibleJson(value)
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n");
}

/** Register `keys show` under `keys`. */
export function registerKeysShow(keys: Command, io: Io): void {
  keys
    .command("show")
    .description("one key: where it stopped, its phase and step timeline, and what a retry would do now")
    .argument("<tenant>", "the tenant the key belongs to")
    .argument("<key>", "the idempotency key")
    .option("--show-state", "also print the stored input and state (may hold personal or payment data)")
    .option("--show-response", "also print the stored response body")
    .option("--json", "print one JSON object (see docs/cli.md)")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo keys show acme order-1002
  $ idempo keys show acme order-1002 --json | jq .retry
  $ idempo keys show acme order-1001 --show-response
  $ idempo keys show acme order-3001 --json | jq .waitingFor   # a suspended run`,
    )
    .action(async (tenant: string, key: string, opts: ShowOptions, command: Command) => {
      await withDatabase(command, async ({ engine, db, schema, now }) => {
        const record = await engine.inspect(tenant, key);
        if (!record)
          throw new OperationalError(
            `no record for key '${visible(key)}' in tenant '${visible(tenant)}' (never used, deleted, or swept and past its tombstone)`,
          );
        if (record.status === "expired") {
          if (opts.json) printJson(io, tombstoneJson(record));
          else io.out(tombstoneView(record, now, io.paint, (name, value) => field(io.paint, name, value)));
          return;
        }
        const facts = factsOf(await deliveredSignals(db, schema, [record]), record);
        const d = diagnose(record, now, facts);
        if (opts.json) {
          const show = { state: opts.showState === true, response: opts.showResponse === true };
          printJson(io, keyDetailJson(record, d, now, show, facts));
          return;
        }
        render(io, record, d, now, opts, facts);
      });
    });
}
