/** Running the program once and turning what happened into an exit status. */
import { CommanderError } from "commander";
import { EXIT_OK, EXIT_OPERATIONAL, EXIT_USAGE, OperationalError } from "./errors.js";
import type { Io } from "./io.js";
import { processIo } from "./io.js";
import { createProgram } from "./program.js";

/**
 * Run `idempo` with `argv` (the arguments after the program name) and
 * return the exit status: 0 success, 1 operational error (one line on
 * stderr), 2 usage error (the message and the command's help on stderr).
 *
 * @example
 * process.exitCode = await run(["keys", "stuck", "--json"])
 */
export async function run(argv: readonly string[], io: Io = processIo()): Promise<number> {
  const program = createProgram(io);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through the same path as errors; commander has already printed.
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT_OK;
      return EXIT_USAGE;
    }
    if (error instanceof OperationalError) {
      io.err(`idempo: ${error.message}\n`);
      return EXIT_OPERATIONAL;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.err(`idempo: ${message.split("\n")[0]}\n`);
    if (io.env.IDEMPO_DEBUG && error instanceof Error && error.stack) io.err(`${error.stack}\n`);
    return EXIT_OPERATIONAL;
  }
}
