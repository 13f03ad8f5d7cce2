import { templateSetup } from "../../testkit/src/index.ts";
import { createEngine } from "../src/index.ts";

/** One migrated template database for the run; each test file clones it. */
export default templateSetup("idempo_tpl", createEngine);
