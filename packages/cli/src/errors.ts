/**
 * The two ways a command fails. An operational error (exit 1) is something
 * about the world: the database is down, the key does not exist. A usage
 * error (exit 2) is something about the command line, and comes with the
 * command's help.
 */

/** Exit status of a successful command. */
export const EXIT_OK = 0;
/** Exit status of an operational error: printed as one line on stderr. */
export const EXIT_OPERATIONAL = 1;
/** Exit status of a usage error: printed with the command's help. */
export const EXIT_USAGE = 2;

/** Something went wrong outside the command line (exit 1); the message is the one-line cause. */
export class OperationalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "OperationalError";
  }
}
