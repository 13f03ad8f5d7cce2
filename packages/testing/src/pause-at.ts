import type { Engine } from "@idempo/core";
import { checkOptions, INTEGER, optionShape, STRING } from "@idempo/core/internal";
import { attachHook, checkPoint } from "./hook-registry.js";

/** Which run {@link pauseAt} stops; unset fields match any run. */
export interface PauseFilter {
  /** Only runs of this tenant. */
  tenantId?: string;
  /** Only runs of this idempotency key. */
  key?: string;
  /** Only this attempt (1 = the first, +1 per takeover). */
  attempt?: number;
}

const FILTER = optionShape({ tenantId: STRING, key: STRING, attempt: INTEGER });

/** A run held at a boundary by {@link pauseAt}. */
export interface Pause {
  /** Resolves once a matching run reaches the boundary and is held there. */
  readonly reached: Promise<void>;
  /**
   * Let the held run go on and stop watching; later runs pass the boundary
   * freely. Calling it before the run arrives lets that run through at once.
   */
  release(): void;
}

/**
 * Hold the first run on `engine` that reaches `point` (and matches
 * `filter`) until `release()`: while it waits, the test can send
 * duplicates, release or let the lease lapse, or inspect the record.
 *
 * The paused attempt keeps its lease alive with its heartbeat, as a slow
 * process would; to have another attempt take over, call
 * `engine.release(tenantId, key)` first. Several pauses (and a running
 * `crashAtEveryBoundary`) may share one engine.
 *
 * @param point `before:phase:<name>`, `after:phase:<name>`, `before:step:<name>`,
 *   `called:step:<name>`, `after:step:<name>`, for a branch of a parallel item
 *   `before:branch:<item>/<branch>`, `called:branch:<item>/<branch>` or
 *   `after:branch:<item>/<branch>` (only that branch is held; the others run on),
 *   or `after:parallel:<item>`; for a `.child` or `.map` item `started:<kind>:<item>`,
 *   `read:<kind>:<item>` or `after:<kind>:<item>`; `after:sleep:<name>`;
 *   `locked:wait:<name>` or `after:wait:<name>`; see `boundariesOf`. With
 *   `#<n>` (`read:map:fan#2`), the `n`-th time one run passes the point
 *   from now on: the visit after its children completed or its signal came.
 * @throws TypeError when `point` is not one of those forms.
 * @throws InvalidOptionError when `filter` holds an unknown key or a value of the wrong type.
 *
 * @example
 * const pause = pauseAt(engine, 'called:step:charge')
 * const first = engine.runOnce(checkout, { tenantId, key, input })
 * await pause.reached
 * await expect(engine.runOnce(checkout, { tenantId, key, input })).rejects.toThrow(IdempotencyKeyInProgressError)
 * pause.release()
 * expect((await first).status).toBe(201)
 */
export function pauseAt(engine: Engine, point: string, filter: PauseFilter = {}): Pause {
  checkOptions("pauseAt", FILTER, filter, "the filter");
  checkPoint(point);
  let reach!: () => void;
  let open!: () => void;
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let held = false;
  // `<point>#<n>`: the visits of `<point>` are counted per run (a name that itself ends in `#<n>` still matches as given).
  const visit = /^(.*)#([0-9]+)$/s.exec(point);
  const base = visit?.[1];
  const nth = Number(visit?.[2]);
  const visits = new Map<string, number>();
  const detach = attachHook(engine, async (p, run) => {
    if (held || (p !== point && p !== base)) return;
    if (filter.tenantId !== undefined && run.tenantId !== filter.tenantId) return;
    if (filter.key !== undefined && run.key !== filter.key) return;
    if (filter.attempt !== undefined && run.attempt !== filter.attempt) return;
    if (p !== point) {
      const id = JSON.stringify([run.tenantId, run.key]);
      const n = (visits.get(id) ?? 0) + 1;
      visits.set(id, n);
      if (n !== nth) return;
    }
    held = true;
    reach();
    await gate;
  });
  return {
    reached,
    release() {
      detach();
      open();
    },
  };
}
