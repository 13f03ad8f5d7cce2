import type { Definition } from "../workflow/definition.js";
import { versionsOf, withChildWorkflows } from "../workflow/versions.js";

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

  /**
   * `remember` for the workflow of a call (`runOnce`, `enqueue`): nothing to
   * do on the hot path once it is known. Its child workflows, at any depth,
   * are checked first, as `startWorker` checks them, since the workers run
   * them: a refusal comes before the call writes anything. A child
   * workflow not known yet by name is remembered with them.
   */
  rememberCalled(def: Definition): void {
    if (this.#byName.get(def.name)?.[0] === def) return;
    const tree = withChildWorkflows(def);
    tree.delete(def.name);
    for (const versions of tree.values()) for (const child of versions) this.check(child);
    this.remember(versionsOf(def));
    for (const [name, versions] of tree) if (!this.#byName.has(name)) this.#byName.set(name, versions);
  }

  /** The known versions of a workflow, newest first; empty when none is known. */
  versions(name: string): readonly Definition[] {
    return this.#byName.get(name) ?? [];
  }
}
