/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites), the one-shot resume of due runs that the `idempo` command uses,
what the test clock of `@idempo/testing` reaches of an engine,
 * and the options check idempo's other packages share with the engine (so
 * that `@idempo/http` and `@idempo/testing` refuse a misspelt option in the
 * same words). Not part of the supported API: import from
 * `@idempo/core/internal`.
 */

export type { OptionKind, OptionShape } from "./options/option-shape.js";
export {
  ANY,
  ARRAY,
  BOOLEAN,
  checkOptions,
  describeValue,
  FUNCTION,
  INTEGER,
  OBJECT,
  optionKind,
  optionShape,
  STRING,
} from "./options/option-shape.js";
export type { DueReport, ResumeDueOptions } from "./runtime/background/resume-due.js";
export { resumeDue } from "./runtime/background/resume-due.js";
export type { ClockAccess, ClockStatements } from "./runtime/clock-access.js";
export { clockAccessOf } from "./runtime/clock-access.js";
export { CrashSignal } from "./runtime/execution/control-flow.js";
export type { FaultHook, HookPoint } from "./runtime/execution/hooks.js";
export { setFaultHook, setHeartbeatSilenced } from "./runtime/execution/hooks.js";
