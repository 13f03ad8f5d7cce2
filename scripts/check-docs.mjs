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

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const origin = new Map(); // block file name -> { doc, start }
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
if (tsc.status !== 0) {
  console.log(`\n${errors} error(s); the extracted blocks are in ${relative(root, out)}/`);
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
console.log("all blocks compile");
