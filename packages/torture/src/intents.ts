/**
 * The clients' side of the ground truth: every intent the suite minted and
 * what each client was told about it. The first response any client saw is
 * the reference every later answer must match byte for byte, and at most
 * one client may ever be told that its call ran the intent (`replayed:
 * false`).
 */
import type { ClientOutcome, WorkflowName } from "./protocol.ts";
import type { Random } from "./random.ts";

export interface Intent {
  readonly id: number;
  readonly workflow: WorkflowName;
  readonly tenantId: string;
  readonly key: string;
  readonly input: Record<string, string | number>;
  /** new: not sent yet; calling: a client waits; retrying: a client will call again; then answered or abandoned. */
  status: "new" | "calling" | "retrying" | "answered" | "abandoned";
  /** Calls its own client made (storm extras not counted). */
  tries: number;
  /** A zombie round's hook point: the attempt that reaches it first freezes its worker there. */
  freezeAt?: string | undefined;
  /** `<status> <body>` of the first response any client saw. */
  firstSeen?: string;
  /** Responses with `replayed: false`; more than one is a duplicate execution. */
  fresh: number;
}

/** What the clients saw, summed. */
export interface ClientStats {
  /** Responses with `replayed: true`. */
  replays: number;
  /** 409 key_in_progress: another attempt held the key. */
  inProgress: number;
  /** 409 lease_lost: the attempt was a zombie and its write was fenced. */
  leaseLost: number;
  /** 503 database_unavailable. */
  unavailable: number;
  /** Of those, the ones naming a COMMIT (or a call sent alone) that may have landed. */
  inDoubt: number;
  /** The provider kept answering 503 through all of a step's retries. */
  providerUnavailable: number;
  /** A business unique constraint refused a write (a zombie redoing its successor's committed phase). */
  uniqueViolations: number;
  /** Errors that are neither idempo's nor a lost connection, by code. */
  unexpected: Map<string, { count: number; sample: string }>;
}

/** How many intents share one key string: the same key in that many tenants, which must never meet. */
const TENANTS = 3;

export class IntentBook {
  readonly intents: Intent[] = [];
  readonly stats: ClientStats = {
    replays: 0,
    inProgress: 0,
    leaseLost: 0,
    unavailable: 0,
    inDoubt: 0,
    uniqueViolations: 0,
    providerUnavailable: 0,
    unexpected: new Map(),
  };
  /** Responses that differ from the first one, or a second fresh response. */
  readonly violations: string[] = [];
  readonly #tag: string;
  readonly #rng: Random;
  readonly #checkoutShare: number;
  #settled = 0;

  constructor(tag: string, rng: Random, checkoutShare = 0.6) {
    this.#tag = tag;
    this.#rng = rng;
    this.#checkoutShare = checkoutShare;
  }

  /** Mint the next intent: a new key and the input its client will send on every retry. */
  mint(only?: WorkflowName): Intent {
    const id = this.intents.length;
    const n = Math.floor(id / TENANTS);
    const drawn: WorkflowName = this.#rng.chance(this.#checkoutShare) ? "checkout" : "fulfilment";
    const workflow = only ?? drawn;
    const amountCents = 100 + this.#rng.below(99_900);
    const input =
      workflow === "checkout"
        ? { cartId: `cart-${this.#tag}-${n}`, amountCents }
        : { orderRef: `ref-${this.#tag}-${n}`, items: 1 + this.#rng.below(9), amountCents };
    const intent: Intent = {
      id,
      workflow,
      tenantId: `tenant-${id % TENANTS}`,
      key: `${this.#tag}-${n}`,
      input,
      status: "new",
      tries: 0,
      fresh: 0,
    };
    this.intents.push(intent);
    return intent;
  }

  /**
   * Record what one client saw; compares responses with the first one seen.
   * `counted: false` checks without adding to the client statistics (the suite's own final replays).
   */
  observe(intent: Intent, outcome: ClientOutcome, counted = true): void {
    if (outcome.kind === "response") {
      const seen = `${outcome.status} ${outcome.text}`;
      if (outcome.replayed) {
        if (counted) this.stats.replays++;
      } else if (++intent.fresh > 1) this.#violation(intent, `${intent.fresh} clients were told they ran it`);
      if (intent.firstSeen === undefined) intent.firstSeen = seen;
      else if (intent.firstSeen !== seen) this.#violation(intent, `response ${seen} differs from ${intent.firstSeen}`);
      return;
    }
    if (outcome.code === "key_in_progress") this.stats.inProgress++;
    else if (outcome.code === "lease_lost") this.stats.leaseLost++;
    else if (outcome.code === "database_unavailable") {
      this.stats.unavailable++;
      if (outcome.inDoubt) this.stats.inDoubt++;
    } else if (outcome.code === "unique_violation") this.stats.uniqueViolations++;
    else if (outcome.code === "provider_unavailable") this.stats.providerUnavailable++;
    else {
      const seen = this.stats.unexpected.get(outcome.code);
      if (seen) seen.count++;
      else
        this.stats.unexpected.set(outcome.code, {
          count: 1,
          sample: `${intent.tenantId}/${intent.key}: ${outcome.message}`,
        });
    }
  }

  /** Move an intent on; answered and abandoned are final. */
  setStatus(intent: Intent, status: Intent["status"]): void {
    if (intent.status === "answered" || intent.status === "abandoned") return;
    intent.status = status;
    if (status === "answered" || status === "abandoned") this.#settled++;
  }

  /** Intents whose client has stopped: answered, or gave up. */
  get settled(): number {
    return this.#settled;
  }

  #violation(intent: Intent, what: string): void {
    this.violations.push(`${intent.tenantId}/${intent.key} (${intent.workflow}): ${what}`);
  }
}
