/**
 * One engine holds one fault hook. This registry lets several helpers
 * (a crash, two pauses) share it: it installs a single dispatching hook
 * while any helper is attached and removes it when the last one leaves.
 */
import type { Engine } from "@idempo/core";
import type { FaultHook } from "@idempo/core/internal";
import { setFaultHook } from "@idempo/core/internal";

const attached = new WeakMap<Engine, Set<FaultHook>>();

/** Attach `hook` to `engine` beside the other helpers' hooks; returns its detach function. */
export function attachHook(engine: Engine, hook: FaultHook): () => void {
  let hooks = attached.get(engine);
  if (!hooks) {
    const set = new Set<FaultHook>();
    hooks = set;
    attached.set(engine, set);
    setFaultHook(engine, async (point, run) => {
      // A snapshot: a hook that detaches itself must not skip the next one.
      for (const h of [...set]) await h(point, run);
    });
  }
  const own = hooks;
  own.add(hook);
  return () => {
    own.delete(hook);
    if (own.size === 0 && attached.get(engine) === own) {
      attached.delete(engine);
      setFaultHook(engine, undefined);
    }
  };
}

const POINT =
  /^(?:(?:before|after):(?:phase|step)|called:step|(?:before|called|after):branch|after:parallel|(?:started|read|after):(?:child|map)|after:sleep|(?:locked|after):wait):./s;

/** Throw a TypeError naming the accepted forms when `point` is not a boundary name (a visit's `#<n>` suffix allowed). */
export function checkPoint(point: unknown): asserts point is string {
  if (typeof point !== "string" || !POINT.test(point)) {
    throw new TypeError(
      `not a boundary: ${JSON.stringify(point)}; expected before:phase:<name>, after:phase:<name>, ` +
        "before:step:<name>, called:step:<name>, after:step:<name>, before:branch:<item>/<branch>, " +
        "called:branch:<item>/<branch>, after:branch:<item>/<branch>, after:parallel:<item>, " +
        "started:<child|map>:<item>, read:<child|map>:<item>, after:<child|map>:<item>, after:sleep:<name>, " +
        "locked:wait:<name> or after:wait:<name>, any of them with #<n> for the n-th visit",
    );
  }
}
