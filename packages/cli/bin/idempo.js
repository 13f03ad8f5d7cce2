#!/usr/bin/env node
// The `idempo` command. Runs the built CLI; in this repository, started with
// `node --import tsx --conditions=@idempo/source bin/idempo.js`, it runs the
// TypeScript source directly (no build step).
import { existsSync } from "node:fs";

const fromSource = process.execArgv.some((a) => a.includes("@idempo/source"));
const built = new URL("../dist/main.js", import.meta.url);
if (fromSource) {
  await import(new URL("../src/main.ts", import.meta.url).href);
} else if (existsSync(built)) {
  await import(built.href);
} else {
  process.stderr.write("idempo: the CLI is not built; run `pnpm --filter @idempo/cli build`\n");
  process.exit(1);
}
