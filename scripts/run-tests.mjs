#!/usr/bin/env node
// `pnpm test:only`: every vitest suite through turbo, then the one-line summary.
// Extra arguments go to turbo, e.g. `pnpm test:only --filter @idempo/core`.
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { bin, log, root, run } from "./bootstrap.mjs";

// Old reports would be counted again (or hide a package that no longer reports).
for (const group of ["packages", "examples"]) {
  const dir = join(root, group);
  if (!existsSync(dir)) continue;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) rmSync(join(dir, entry.name, ".vitest"), { recursive: true, force: true });
  }
}

const turboArgs = ["run", "test", "--continue", ...(process.env.CI ? ["--log-order=grouped"] : [])];
log(`turbo ${[...turboArgs, ...process.argv.slice(2)].join(" ")}`);
const tests = run(bin("turbo"), [...turboArgs, ...process.argv.slice(2)]);
const summary = run(process.execPath, [join(root, "scripts", "ci-summary.mjs")]);
process.exit(tests !== 0 ? tests : summary);
