#!/usr/bin/env node
// `npm test`: set up (pnpm + locked install), then every check CI runs. A
// failing check does not stop the later ones; the exit code is non-zero if
// any failed.
//
// Lint, knip, the docs check and the typecheck run side by side: none of them
// writes what another reads (the typecheck's `tsc -b` writes dist/, which the
// others never look at), and three of them are mostly one thread, so on a
// two-core machine they fit beside the typecheck's parallel compilers. Each
// one's output is printed whole when it ends. The tests come after them, on
// their own: the Next.js example's test runs `tsc -b` itself, and two builds
// at once would write the same dist/ files.
import { spawn } from "node:child_process";
import { env, log, root, run, setUp } from "./bootstrap.mjs";

setUp();

const together = [
  ["lint", "lint:ci"],
  ["knip", "knip"],
  ["docs", "docs:check"],
  ["typecheck", "typecheck"],
];
const after = [["test", "test:only"]];

/** `pnpm run script` with its output kept, printed in one piece when it ends; resolves to its result. */
function runKept(name, script) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn("pnpm", ["run", script], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    const chunks = [];
    child.stdout.on("data", (d) => chunks.push(d));
    child.stderr.on("data", (d) => chunks.push(d));
    const done = (status) => {
      log(`${name}: pnpm run ${script}`);
      process.stdout.write(Buffer.concat(chunks));
      resolve({ name, status, seconds: ((Date.now() - started) / 1000).toFixed(1) });
    };
    child.on("error", (error) => {
      chunks.push(Buffer.from(`pnpm: ${error.message}\n`));
      done(127);
    });
    child.on("close", (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

log(`side by side: ${together.map(([name]) => name).join(", ")}`);
const results = await Promise.all(together.map(([name, script]) => runKept(name, script)));
for (const [name, script] of after) {
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
