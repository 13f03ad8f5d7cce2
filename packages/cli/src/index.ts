/** `@idempo/cli`: the `idempo` command, also callable in-process. */
export type { Io } from "./io.js";
export { run } from "./run.js";
