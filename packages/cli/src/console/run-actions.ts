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
  /** The confirmation question: what will change; `item` is the chosen item of a verb that takes one. */
  question(record: RunRecord, item: string | undefined): string;
  /** The items to choose from, for a verb that takes one (retry from); undefined for the others. */
  items?(record: RunRecord): readonly string[];
  /** Perform it, through the same engine operation as the CLI verb. */
  perform(engine: Engine, record: RunRecord, item: string | undefined): Promise<unknown>;
}

/** Item names of the definition the run started under (`kind:name` entries). */
const itemNames = (r: RunRecord) => r.definition.map((entry) => entry.slice(entry.indexOf(":") + 1));
/** No attempt owns it: expired lease, parked, or suspended. */
const unowned = (r: RunRecord) =>
  r.status === "parked" || r.status === "suspended" || (r.status === "in_flight" && (r.leaseRemainingMs ?? 0) <= 0);

/** Every verb, in the order the run page shows them. */
export const RUN_ACTIONS: readonly RunAction[] = [
  {
    name: "release",
    label: "Release lease",
    applies: (r) => r.status === "in_flight",
    question: (r) =>
      `Expire the lease of ${r.tenantId}/${r.key} now, so that the next retry (or idempo resume) takes the run over at once. ` +
      "Use it when the process that held the key is gone.",
    perform: (engine, r) => engine.release(r.tenantId, r.key),
  },
  {
    name: "cancel",
    label: "Cancel run",
    applies: (r) => r.status === "in_flight" || r.status === "parked" || r.status === "suspended",
    question: (r) =>
      `Finish ${r.tenantId}/${r.key} now with a stored 409 run_canceled answer, which every retry then replays. ` +
      "Committed phases, recorded steps and queued outbox messages stay; a live owner fails at its next renewal or write.",
    perform: (engine, r) => engine.cancel(r.tenantId, r.key),
  },
  {
    name: "retry-from",
    label: "Retry from…",
    applies: unowned,
    items: itemNames,
    question: (r, item) =>
      `Move the recovery point of ${r.tenantId}/${r.key} back so that ${item ?? "the chosen item"} and everything after it ` +
      "run again on the next takeover. A step that runs again uses the same derived key; a phase that runs again writes again." +
      (r.status === "parked" ? " The run is also unparked, with a fresh attempt budget." : ""),
    perform: (engine, r, item) => engine.retryFrom(r.tenantId, r.key, item ?? ""),
  },
  {
    name: "unpark",
    label: "Unpark",
    applies: (r) => r.status === "parked",
    question: (r) =>
      `Make ${r.tenantId}/${r.key} takeable again with a fresh attempt budget (parked: ${r.parkedReason ?? "unknown reason"}). ` +
      "Do it once the code or data that made it fail is fixed.",
    perform: (engine, r) => engine.unpark(r.tenantId, r.key),
  },
];

/** The verb called `name`, or undefined. */
export function runAction(name: string): RunAction | undefined {
  return RUN_ACTIONS.find((a) => a.name === name);
}
