/** What the parts of the durable scenario share: the shape of an intent, and where violations are written down. */

/** One payment of the scenario: its key, its input, and the confirmation the provider sends for it. */
export interface Intent {
  readonly tenantId: string;
  readonly key: string;
  readonly input: { intent: string; sleepMs: number };
  readonly payload: { intent: string; nonce: string };
}

/** The violations found so far: `problems` in the order found, `other` those counted under no other heading. */
export class Findings {
  readonly problems: string[] = [];
  other = 0;

  /** Write down a violation counted under its own heading (duplicate effects, lost intents, ...). */
  note(text: string): void {
    this.problems.push(text);
  }

  /** Write down a violation of no other heading: it counts under `otherViolations`. */
  violation(text: string): void {
    this.other++;
    this.problems.push(text);
  }
}

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
