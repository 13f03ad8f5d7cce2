#!/usr/bin/env node
// `npm test`: set up (pnpm + locked install), then every check CI runs. A
// failing check does not stop the later ones; the exit code is non-zero if
// any failed.
import { log, run, setUp } from "./bootstrap.mjs";

setUp();

const checks = [
  ["lint", "lint:ci"],
  ["knip", "knip"],
  ["typecheck", "typecheck"],
  ["docs", "docs:check"],
  ["test", "test:only"],
];
const results = [];
for (const [name, script] of checks) {
  log(`${name}: pnpm run ${script}`);
  const started = Date.now();
  const status = run("pnpm", ["run", script]);
  results.push({ name, status, seconds: ((Date.now() - started) / 1000).toFixed(1) });
}

log("summary");
for (const { name, status, seconds } of results) {
  console.log(
    `${status === 0 ? "ok    " : "FAILED"} ${name.padEnd(10)} ${seconds}s${status === 0 ? "" : ` (exit ${status})`}`,
  );
}
process.exit(results.some((r) => r.status !== 0) ? 1 : 0);
