/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites), and the one-shot resume of due runs that the `idempo` command
 * uses. Not part of the supported API: import from `@idempo/core/internal`.
 */
export type { FaultHook, HookPoint } from "./runtime/hooks.js";
export { setFaultHook, setHeartbeatSilenced } from "./runtime/hooks.js";
export type { DueReport, ResumeDueOptions } from "./runtime/resume-due.js";
export { resumeDue } from "./runtime/resume-due.js";
export { CrashSignal } from "./runtime/signals.js";
