/** The process entry point of the `idempo` binary. */
import { run } from "./run.js";

const code = await run(process.argv.slice(2));
// Exit once stdout has drained: a user's workflow module (idempo resume) may hold handles open.
process.stdout.write("", () => process.exit(code));
