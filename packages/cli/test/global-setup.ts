import { createEngine } from "@idempo/core";
import { templateSetup } from "../../testkit/src/index.ts";

/** One migrated template database for the run; each test file clones it. */
export default templateSetup("idempo_cli_tpl", createEngine);
