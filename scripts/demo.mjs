#!/usr/bin/env node
// `npm run demo`: set up (pnpm + locked install), then run the checkout example.
import { log, run, setUp } from "./bootstrap.mjs";

setUp();
const args = ["--filter", "@idempo/example-checkout", "start", ...process.argv.slice(2)];
log(`pnpm ${args.join(" ")}`);
process.exit(run("pnpm", args));
