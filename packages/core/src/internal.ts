/**
 * Fault injection for test tooling (`@idempo/testing` and idempo's own
 * suites). Not part of the supported API: import from `@idempo/core/internal`.
 */

export { CrashSignal } from "./runtime/execution/control-flow.js";
export type { FaultHook, HookPoint } from "./runtime/execution/hooks.js";
export { setFaultHook, setHeartbeatSilenced } from "./runtime/execution/hooks.js";
