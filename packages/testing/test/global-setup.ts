// By path, not by package name: a globalSetup does not resolve through the source condition,
// and the built package would read the migrations copied into dist instead of the sources.
import { createEngine } from "../../core/src/index.ts";
import { templateSetup } from "../../testkit/src/index.ts";

/** One migrated template database for the run; each test file clones it. */
export default templateSetup("idempo_testing_tpl", createEngine);
