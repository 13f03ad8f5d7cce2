/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites). Not part of the supported API: import from `@idempo/core/internal`.
 */
export type { FaultHook, HookPoint } from "./runtime/hooks.js";
export { setFaultHook, setHeartbeatSilenced } from "./runtime/hooks.js";
export { CrashSignal } from "./runtime/signals.js";
