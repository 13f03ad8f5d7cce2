// By relative path: a globalSetup module is not resolved through the
// `@idempo/source` condition, so the package name would need a build first.
import { createEngine } from "../../core/src/index.ts";
import { templateSetup } from "../../testkit/src/index.ts";

/** One migrated template database for the run; each test file clones it. */
export default templateSetup("idempo_relays_tpl", createEngine);
