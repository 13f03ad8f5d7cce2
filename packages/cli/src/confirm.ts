/** Confirmation for commands that change records: asked on a terminal, `--yes` required elsewhere. */
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { OperationalError } from "./errors.js";
import type { Io } from "./io.js";
import { usageError } from "./usage.js";

/**
 * Go ahead when `yes` was given, or when someone at a terminal answers `y`.
 * Without a terminal and without `--yes` it is a usage error (exit 2): a
 * script must say what it means.
 *
 * @throws OperationalError "aborted" when the answer is no.
 */
export async function confirmChange(command: Command, io: Io, yes: boolean, question: string): Promise<void> {
  if (yes) return;
  if (!io.interactive) usageError(command, `${question.replace(/\?$/, "")}: needs --yes when not run on a terminal`);
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = (await rl.question(`${question} [y/N] `)).trim().toLowerCase();
    if (answer !== "y" && answer !== "yes") throw new OperationalError("aborted: nothing was changed");
  } finally {
    rl.close();
  }
}
