import type { Workflow } from "../../workflow/definition.js";
import type { ScheduleTick } from "./schedule-options.js";

/** What this process gave `schedule` for one name. */
interface Registration {
  readonly workflow: Workflow<unknown, unknown>;
  readonly input: ((tick: ScheduleTick) => unknown) | undefined;
}

/**
 * The schedules registered in one engine, by name: what the database
 * cannot hold (the workflow object, the input function) and the firing
 * loops of this engine's workers need. A registration wakes those loops,
 * so a schedule made after a worker started is fired from its first tick.
 */
export class ScheduleRegistry {
  readonly #byName = new Map<string, Registration>();
  readonly #listeners = new Set<() => void>();

  get(name: string): Registration | undefined {
    return this.#byName.get(name);
  }

  entries(): IterableIterator<[string, Registration]> {
    return this.#byName.entries();
  }

  set(name: string, registration: Registration): void {
    this.#byName.set(name, registration);
    for (const listener of this.#listeners) listener();
  }

  delete(name: string): void {
    this.#byName.delete(name);
  }

  /** Call `listener` on every registration until the returned function is called. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
