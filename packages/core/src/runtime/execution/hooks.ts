/**
 * Fault injection for tests (idempo's own and `@idempo/testing`): a hook
 * called at every boundary of a run. It is attached to an engine from
 * outside, never through public options, so production code cannot turn it
 * on by accident.
 */

/**
 * Where a run can be stopped or paused:
 * `before:phase:<name>` (no transaction open yet), `after:phase:<name>` (committed),
 * `before:step:<name>` (start recorded, not called), `called:step:<name>` (call
 * returned, result not recorded), `after:step:<name>` (recorded); for each branch
 * of a parallel item, `before:branch:<item>/<branch>`, `called:branch:<item>/<branch>`
 * and `after:branch:<item>/<branch>` (the same three, per branch), then
 * `after:parallel:<item>` (every branch recorded, the item committed).
 * A `.child` or `.map` item (`<kind>` is `child` or `map`): `started:<kind>:<item>`
 * (children created, inside the transaction that records the start, before
 * its commit; only on the visit that creates them), `read:<kind>:<item>` (the
 * children read under the parent's lock, same transaction) and
 * `after:<kind>:<item>` (committed: suspended for the children, or moved
 * past them); a run passes `read:` and `after:` again on the visit after its
 * last child completed. A `.sleep`: `after:sleep:<name>` (suspended, the
 * wake-up committed; the run that wakes goes on after it). A `.waitFor`:
 * `locked:wait:<name>` (the run's row locked, nothing written yet) and
 * `after:wait:<name>` (committed: suspended, or moved past with the signal),
 * both again on the visit after the signal came.
 */
export type HookPoint = string;

/** Called at each point; throw `CrashSignal` to crash there, or await to pause. */
export type FaultHook = (
  point: HookPoint,
  run: { tenantId: string; key: string; attempt: number },
) => void | Promise<void>;

const hooks = new WeakMap<object, FaultHook>();

/** Attach (or with `undefined`, detach) a fault hook to an engine. */
export function setFaultHook(engine: object, hook: FaultHook | undefined): void {
  if (hook) hooks.set(engine, hook);
  else hooks.delete(engine);
}

export function faultHookOf(engine: object): FaultHook | undefined {
  return hooks.get(engine);
}

const silent = new WeakSet<object>();

/**
 * Stop (or with `false`, restart) the lease renewals of every attempt this
 * engine starts from now on, so a test can make a zombie whose lease lapses
 * while it still works. A heartbeat slower than the lease is refused as an
 * option, so tests reach that state through this hook instead.
 */
export function setHeartbeatSilenced(engine: object, silenced: boolean): void {
  if (silenced) silent.add(engine);
  else silent.delete(engine);
}

export function heartbeatSilenced(engine: object): boolean {
  return silent.has(engine);
}
