#!/usr/bin/env node
// Part of the build: copy the repository's top-level migrations/ (the one
// source of idempo's SQL) into dist/migrations, where the built and packed
// package's runner looks for them. The destination is replaced, so a file
// removed or renamed at the top level does not linger in a package.
// Usage: node scripts/copy-migrations.mjs [destination] (Default: dist/migrations)
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(packageDir, "../../migrations");
const destination = resolve(packageDir, process.argv[2] ?? "dist/migrations");

const files = readdirSync(source).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f));
if (files.length === 0) {
  console.error(`copy-migrations: no NNNN_name.sql file in ${source}`);
  process.exit(1);
}
rmSync(destination, { recursive: true, force: true });
mkdirSync(destination, { recursive: true });
for (const file of files) copyFileSync(join(source, file), join(destination, file));
console.log(`copy-migrations: ${files.length} files to ${destination}`);
