#!/usr/bin/env node
// `pnpm docs:check`: type-check every ```ts block of the documentation
// against the real packages. Each block is written as its own module into
// packages/docs-check/.blocks/ (that package depends on the @idempo packages
// and on the libraries the docs use), then `tsc` runs over them with the
// repository's strict settings and the `@idempo/source` condition, so nothing
// has to be built first. Errors are reported at their line in the Markdown.
//
// A block must compile on its own, imports included. A deliberately partial
// one uses the info string `ts fragment` and is skipped.
//
// The docstrings of the main exports (EXAMPLES below) must each carry a short
// example, a ```ts block as Kysely's do; the check fails when one has none.
// Every ```ts block in the docstrings of those files is compiled too, with
// DOCSTRING_PRELUDE in front (so an example needs no imports: `db`, `engine`
// and `checkout` are given) and inside a `{ }` of its own (so it may declare
// those names again).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { bin, root } from "./bootstrap.mjs";

const workspace = join(root, "packages", "docs-check");
const out = join(workspace, ".blocks");

/** README.md, every Markdown file under docs/, and each package's README. */
function documents() {
  const found = [join(root, "README.md")];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".md")) found.push(path);
    }
  };
  walk(join(root, "docs"));
  for (const dir of ["packages", "examples"]) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const readme = join(root, dir, name, "README.md");
      if (name !== "docs-check" && existsSync(readme)) found.push(readme);
    }
  }
  return found;
}

const TS = new Set(["ts", "typescript", "mts"]);

/** The exports whose docstring must show an example, by the file that declares them. */
const EXAMPLES = {
  "packages/core/src/runtime/engine.ts": [
    "createEngine",
    "runOnce",
    "enqueue",
    "signal",
    "wait",
    "startWorker",
    "startRelay",
    "schedule",
    "unschedule",
    "listSchedules",
    "pauseSchedule",
    "resumeSchedule",
    "listScheduleTicks",
  ],
  "packages/core/src/runtime/operator/overview.ts": ["overview"],
  "packages/core/src/workflow/workflow.ts": ["workflow"],
  "packages/core/src/workflow/parallel-builder.ts": ["step"],
  "packages/core/src/workflow/builder.ts": [
    "concurrency",
    "priority",
    "input",
    "phase",
    "step",
    "parallel",
    "sleep",
    "waitFor",
    "accepted",
    "version",
    "replaces",
    "respond",
  ],
  "packages/http/src/adapters/fetch.ts": ["idempotency", "idempotent", "webhook"],
  "packages/testing/src/test-clock.ts": ["createTestClock"],
};

/** Imports a file's docstring examples get on top of the prelude (the entry the file is published as). */
const PRELUDE_IMPORTS = {
  "packages/http/src/adapters/fetch.ts": `import { idempotency, idempotent, webhook } from "@idempo/http/fetch";\n`,
  "packages/testing/src/test-clock.ts": `import { createTestClock } from "@idempo/testing";\n`,
};

/** What every docstring example may use without importing it. */
const DOCSTRING_PRELUDE = `import type { Engine, Workflow } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import type { Kysely } from "kysely";
import { z } from "zod";
interface Database {
  orders: { id: string; cart_id: string; amount_cents: number };
}
declare const db: Kysely<Database>;
declare const engine: Engine;
declare const checkout: Workflow<{ cartId: string; amountCents: number }, { orderId: string }>;
declare const payments: {
  charge(amountCents: number, options: { idempotencyKey: string; signal: AbortSignal }): Promise<{ id: string }>;
};
declare const mailer: { send(message: { orderId?: string; idempotencyKey: string; signal?: AbortSignal }): Promise<{ id: string }> };
declare const sms: { send(message: { orderId?: string; idempotencyKey: string }): Promise<{ id: string }> };
`;

/**
 * The fenced code blocks of a Markdown file: info string, first line of the
 * code (1-based), the code with the fence's indentation removed.
 */
function blocks(text) {
  const result = [];
  const lines = text.split("\n");
  let open;
  lines.forEach((line, i) => {
    const fence = /^( *)(`{3,}|~{3,})(.*)$/.exec(line);
    if (!open) {
      if (fence) open = { indent: fence[1].length, marker: fence[2], info: fence[3].trim(), start: i + 2, code: [] };
      return;
    }
    if (fence?.[2].startsWith(open.marker) && fence[3].trim() === "") {
      result.push({ info: open.info, start: open.start, code: open.code.join("\n") });
      open = undefined;
      return;
    }
    open.code.push(line.slice(Math.min(open.indent, line.length - line.trimStart().length)));
  });
  return result;
}

const origin = new Map(); // block file name -> { doc, start }

/**
 * The docstrings of a TypeScript file: the name declared after each one, its
 * text with the leading ` * ` removed, and the line it starts on (1-based).
 */
function docstrings(text) {
  const found = [];
  const re =
    /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*(?:export\s+)?(?:async\s+)?(?:function\s+|class\s+|interface\s+)?([A-Za-z_$][\w$]*)/g;
  for (const m of text.matchAll(re)) {
    const line = text.slice(0, m.index).split("\n").length;
    const body = m[1]
      .split("\n")
      .map((l) => l.replace(/^\s*\* ?/, ""))
      .join("\n");
    found.push({ name: m[2], body, line });
  }
  return found;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const missing = [];
const preludeLines = DOCSTRING_PRELUDE.split("\n").length - 1;
for (const [file, required] of Object.entries(EXAMPLES)) {
  const docs = docstrings(readFileSync(join(root, file), "utf8"));
  for (const name of required) {
    const doc = docs.find((d) => d.name === name);
    const examples = doc ? blocks(doc.body).filter((b) => TS.has(b.info.split(/\s+/)[0] ?? "")) : [];
    if (!doc) missing.push(`${file}: ${name} has no docstring`);
    else if (examples.length === 0)
      missing.push(`${file}:${doc.line}: ${name} has no example (a \`\`\`ts block in its docstring)`);
  }
  for (const doc of docs) {
    for (const block of blocks(doc.body)) {
      const [lang, ...flags] = block.info.split(/\s+/);
      if (!TS.has(lang ?? "") || flags.includes("fragment")) continue;
      const start = doc.line + block.start - 1; // the block's first line in the source file
      const name = `${file.replace(/\.ts$/, "").replace(/[^A-Za-z0-9]+/g, "-")}-${doc.name}-L${start}.ts`;
      const imports = PRELUDE_IMPORTS[file] ?? "";
      writeFileSync(join(out, name), `${imports}${DOCSTRING_PRELUDE}{\n${block.code}\n}\n`);
      origin.set(name, { doc: file, start: start - preludeLines - imports.split("\n").length });
    }
  }
}

let skipped = 0;
for (const doc of documents()) {
  const rel = relative(root, doc);
  for (const block of blocks(readFileSync(doc, "utf8"))) {
    const [lang, ...flags] = block.info.split(/\s+/);
    if (!TS.has(lang ?? "")) continue;
    if (flags.includes("fragment")) {
      skipped++;
      continue;
    }
    const name = `${rel.replace(/\.md$/, "").replace(/[^A-Za-z0-9]+/g, "-")}-L${block.start}.ts`;
    writeFileSync(join(out, name), `${block.code}\n`);
    origin.set(name, { doc: rel, start: block.start });
  }
}

writeFileSync(
  join(out, "tsconfig.json"),
  `${JSON.stringify(
    {
      extends: "../../../tsconfig.base.json",
      compilerOptions: {
        noEmit: true,
        composite: false,
        declaration: false,
        declarationMap: false,
        tsBuildInfoFile: null,
        customConditions: ["@idempo/source"],
        // Every block is a module of its own, also one without imports.
        moduleDetection: "force",
        // A block shows how to use a value; it need not use every name it declares.
        noUnusedLocals: false,
      },
      include: ["*.ts"],
    },
    null,
    2,
  )}\n`,
);

console.log(`checking ${origin.size} TypeScript blocks (${skipped} marked fragment, skipped)`);
const tsc = spawnSync(bin("tsc"), ["-p", join(out, "tsconfig.json"), "--pretty", "false"], {
  cwd: workspace,
  encoding: "utf8",
});
if (tsc.error) {
  console.error(`tsc: ${tsc.error.message}`);
  process.exit(127);
}

// `file.ts(12,5): error TS2304: ...` -> `docs/x.md:40:5 error TS2304: ...` (the block's line in the Markdown).
let errors = 0;
for (const line of `${tsc.stdout}${tsc.stderr}`.split("\n")) {
  if (line === "") continue;
  const m = /^(.*?)\((\d+),(\d+)\): (.*)$/.exec(line);
  const block = m && origin.get(relative(out, join(workspace, m[1])));
  if (m && block) {
    errors++;
    console.log(`${block.doc}:${block.start + Number(m[2]) - 1}:${m[3]} ${m[4]}`);
  } else {
    if (m) errors++;
    console.log(line);
  }
}
for (const line of missing) console.log(line);
if (tsc.status !== 0 || missing.length > 0) {
  if (missing.length > 0) errors += missing.length;
  console.log(`\n${errors} error(s); the extracted blocks are in ${relative(root, out)}/`);
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
console.log("all blocks compile");
