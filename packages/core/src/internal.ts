/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites), and the one-shot resume of due runs that the `idempo` command
 * uses. Not part of the supported API: import from `@idempo/core/internal`.
 */

export type { DueReport, ResumeDueOptions } from "./runtime/background/resume-due.js";
export { resumeDue } from "./runtime/background/resume-due.js";
export { CrashSignal } from "./runtime/execution/control-flow.js";
export type { FaultHook, HookPoint } from "./runtime/execution/hooks.js";
export { setFaultHook, setHeartbeatSilenced } from "./runtime/execution/hooks.js";
