// By path, not by package name: a globalSetup does not resolve through the source condition.
import { createEngine } from "../../../packages/core/src/index.ts";
import { templateSetup } from "../../../packages/testkit/src/index.ts";

/** One migrated template database for the run; the test file clones it. */
export default templateSetup("idempo_payout_tpl", createEngine);
