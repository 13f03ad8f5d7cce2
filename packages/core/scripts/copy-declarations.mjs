#!/usr/bin/env node
// Part of the build: copy the declaration files written by hand in src/
// (`*.d.ts`, which tsc reads but does not emit) into dist/ at the same
// paths, as they are. src/database/kysely-types.d.ts is one: its
// `@ts-ignore` before the import of the optional peer `kysely` must reach
// the package's declarations, and tsc drops such comments from what it emits.
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(packageDir, "src");
const destination = join(packageDir, "dist");

let copied = 0;
for (const entry of readdirSync(source, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith(".d.ts")) continue;
  const from = join(entry.parentPath, entry.name);
  const to = join(destination, relative(source, from));
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
  copied++;
}
console.log(`copy-declarations: ${copied} files to ${destination}`);
