import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { painter } from "./format/colour.js";
import type { Io } from "./io.js";
import { createProgram } from "./program.js";

function capture(): Io & { text: () => string } {
  let text = "";
  return {
    out: (t) => {
      text += t;
    },
    err: (t) => {
      text += t;
    },
    paint: painter(false),
    interactive: false,
    stderrIsTTY: false,
    env: {},
    text: () => text,
  };
}

function leaves(cmd: Command, path: string[] = []): { path: string; cmd: Command }[] {
  const here = { path: [...path, cmd.name()].join(" "), cmd };
  return [here, ...cmd.commands.flatMap((c) => leaves(c, [...path, cmd.name()]))];
}

describe("help", () => {
  const io = capture();
  const all = leaves(createProgram(io));

  it("covers the commands operators need", () => {
    expect(all.map((c) => c.path)).toEqual([
      "idempo",
      "idempo migrate",
      "idempo keys",
      "idempo keys list",
      "idempo keys stuck",
      "idempo keys parked",
      "idempo keys show",
      "idempo keys release",
      "idempo keys cancel",
      "idempo keys retry-from",
      "idempo keys unpark",
      "idempo keys delete",
      "idempo resume",
      "idempo sweep",
      "idempo outbox",
      "idempo outbox list",
      "idempo outbox dead",
      "idempo outbox retry",
      "idempo schedules",
      "idempo schedules list",
      "idempo schedules show",
      "idempo schedules pause",
      "idempo schedules resume",
      "idempo stats",
      "idempo console",
    ]);
  });

  it.each(all.map((c) => [c.path, c.cmd] as const))("%s --help has examples", (path, cmd) => {
    const out = capture();
    cmd.configureOutput({ writeOut: out.out, writeErr: out.err });
    // addHelpText('after') is emitted around outputHelp, not part of helpInformation.
    cmd.outputHelp();
    expect(out.text()).toMatch(/Examples:\n {2}\$ \S/);
    expect(out.text()).toContain(`Usage: ${path}`);
  });
});
