/**
 * Helpers to test your own idempo workflows under crashes and duplicates:
 * crash a run at every boundary and check each effect happened once, hold
 * a run at a boundary, an engine with a short lease, and a test clock that
 * moves an engine's time forward on request.
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
export type { ClockReport, ClockRun, TestClock, TestClockOptions } from "./test-clock.js";
export { createTestClock } from "./test-clock.js";
export type { TestEngineOptions } from "./test-engine.js";
export { testEngine } from "./test-engine.js";
