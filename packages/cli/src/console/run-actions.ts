/**
 * The operator verbs the console offers on one run. Each calls the same
 * engine operation as the CLI verb of the same name; the console adds only a
 * confirmation page that says what the verb changes and what the next retry
 * will then do.
 */
import type { Engine, RunRecord } from "@idempo/core";

/** One verb on a run. */
export interface RunAction {
  /** Path segment and form name, e.g. `release`. */
  readonly name: string;
  /** Button label. */
  readonly label: string;
  /** Whether the verb makes sense for the record as it is now. */
  applies(record: RunRecord): boolean;
  /** The confirmation question: what will change. */
  question(record: RunRecord): string;
  /** Perform it; resolves with a sentence saying what was done. */
  perform(engine: Engine, record: RunRecord): Promise<string>;
}

/** Every verb, in the order the run page shows them. */
export const RUN_ACTIONS: readonly RunAction[] = [
  {
    name: "release",
    label: "Release lease",
    applies: (r) => r.status === "in_flight",
    question: (r) =>
      `Expire the lease of ${r.tenantId}/${r.key} now, so that the next retry (or idempo resume) takes the run over at once. ` +
      "Use it when the process that held the key is gone.",
    async perform(engine, r) {
      const released = await engine.release(r.tenantId, r.key);
      return released ? "Lease released." : "Nothing to release: the run finished or vanished meanwhile.";
    },
  },
];

/** The verb called `name`, or undefined. */
export function runAction(name: string): RunAction | undefined {
  return RUN_ACTIONS.find((a) => a.name === name);
}
