/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites), the one-shot resume of due runs that the `idempo` command uses,
 * what the test clock of `@idempo/testing` reaches of an engine,
 * and the options check idempo's other packages share with the engine (so
 * that `@idempo/http` and `@idempo/testing` refuse a misspelt option in the
 * same words), and the reading of a stored outline (the CLI's and the crash
 * helpers' view of a run's items). Not part of the supported API: import from
 * `@idempo/core/internal`.
 */

export {
  ANY,
  ARRAY,
  BOOLEAN,
  checkOptions,
  describeValue,
  FUNCTION,
  INTEGER,
  OBJECT,
  type OptionKind,
  type OptionShape,
  optionKind,
  optionShape,
  STRING,
} from "./options/option-shape.js";
export type { DueReport, ResumeDueOptions } from "./runtime/background/resume-due.js";
export { type ClockAccess, type ClockStatements, clockAccessOf, resumeDue } from "./runtime/engine-internals.js";
export { CrashSignal } from "./runtime/execution/control-flow.js";
export { type FaultHook, type HookPoint, setFaultHook, setHeartbeatSilenced } from "./runtime/execution/hooks.js";
export { type OutlineItem, outlineItem } from "./workflow/definition.js";
