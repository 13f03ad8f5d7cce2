import type { Definition } from "../workflow/definition.js";
import { versionsOf } from "../workflow/versions.js";

/**
 * Definitions an engine has been given or has run, by name, every deployed
 * version newest first: what `signal` checks payloads against (the run's
 * own version when it is among them).
 */
export class KnownWorkflows {
  readonly #byName = new Map<string, readonly Definition[]>();

  /** @param check called with each version the first time it is remembered; may throw to refuse it. */
  constructor(private readonly check: (def: Definition) => void = () => {}) {}

  /** Keep the deployed versions of one workflow (newest first), once `check` accepts each. */
  remember(versions: readonly Definition[]): void {
    const newest = versions[0];
    if (!newest?.items) return;
    for (const def of versions) this.check(def);
    this.#byName.set(newest.name, versions);
  }

  /** `remember` for the workflow of a call: nothing to do on the hot path once it is known. */
  rememberCalled(def: Definition): void {
    if (this.#byName.get(def.name)?.[0] !== def) this.remember(versionsOf(def));
  }

  /** The known versions of a workflow, newest first; empty when none is known. */
  versions(name: string): readonly Definition[] {
    return this.#byName.get(name) ?? [];
  }
}
