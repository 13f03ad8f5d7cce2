#!/usr/bin/env node
// `npm run setup`: the pinned pnpm and the locked dependencies, nothing else.
import { setUp } from "./bootstrap.mjs";

setUp();
