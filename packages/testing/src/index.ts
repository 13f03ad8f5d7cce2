/**
 * Helpers to test your own idempo workflows under crashes and duplicates:
 * crash a run at every boundary and check each effect happened once, hold
 * a run at a boundary, and an engine with a short lease.
 */
export { boundariesOf } from "./boundaries.js";
export type {
  CrashAtEveryBoundaryOptions,
  Effect,
  EffectCounter,
  InputFor,
  RecordedRequest,
  RequestLog,
} from "./crash-at-every-boundary.js";
export { crashAtEveryBoundary } from "./crash-at-every-boundary.js";
export type { Pause, PauseFilter } from "./pause-at.js";
export { pauseAt } from "./pause-at.js";
export type { BoundaryResult, CrashReport, EffectCount } from "./report.js";
export { assertExactlyOnce, ExactlyOnceError } from "./report.js";
export type { TestEngineOptions } from "./test-engine.js";
export { testEngine } from "./test-engine.js";
