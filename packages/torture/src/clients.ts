/**
 * The clients: they send each intent to a worker, wait, and behave like
 * real callers holding an idempotency key. A 409 waits `retryAfterMs` and
 * tries again (that is how takeovers happen); a dropped connection or a
 * dead server is retried with backoff; a call that hangs (its worker is
 * paused) times out and is retried elsewhere, leaving the old attempt a
 * zombie; and a client whose worker died sometimes gives up, leaving the
 * run for `resumeStale`.
 */
import type { Intent, IntentBook } from "./intents.ts";
import type { ClientOutcome } from "./protocol.ts";
import type { Random } from "./random.ts";
import type { Fleet, WorkerProcess } from "./worker-fleet.ts";

interface Call {
  readonly intent: Intent;
  /** The intent's own client (storm extras only observe). */
  readonly primary: boolean;
  /** The client timed out and moved on; a late answer is still checked. */
  superseded: boolean;
  timer?: NodeJS.Timeout;
}

export interface ClientOptions {
  readonly fleet: Fleet;
  readonly book: IntentBook;
  readonly rng: Random;
  readonly leaseMs: number;
  /** Calls one worker serves at once. */
  readonly slots: number;
  /** Intents to mint in all. */
  readonly target: number;
  /** How many intents may be minted for now: the chaos holds minting back until its due fault is done. */
  readonly mintLimit: () => number;
}

/** Most calls an intent's client makes before it gives up. */
const MAX_TRIES = 40;
/** Probability that a client whose worker died gives up instead of retrying. */
const GIVE_UP_ON_DEATH = 0.3;

export class Clients {
  readonly #o: ClientOptions;
  readonly #calls = new Map<number, Call>();
  readonly #retryTimers = new Set<NodeJS.Timeout>();
  readonly #due: Intent[] = [];
  #nextCall = 1;
  #minting = true;

  constructor(options: ClientOptions) {
    this.#o = options;
  }

  /** Every intent asked for has been minted and sent at least once. */
  get allSent(): boolean {
    return this.#o.book.intents.length >= this.#o.target;
  }

  /** Fill every free slot of every ready worker: retries first, then new intents. */
  dispatch(): void {
    const { fleet, book, slots } = this.#o;
    for (;;) {
      const worker = fleet
        .ready()
        .filter((w) => w.calls.size < slots)
        .sort((a, b) => a.calls.size - b.calls.size)[0];
      if (!worker) return;
      const intent = this.#due.shift() ?? (this.#canMint() ? book.mint() : undefined);
      if (!intent) return;
      this.#call(worker, intent, 1, true);
    }
  }

  /**
   * A duplicate storm: one request from several clients on every ready
   * worker at once. Half the time on a brand-new key (the claim race), else
   * on a key in flight (409s) or an answered one (replays).
   * @returns false when there was nothing to storm (try again later).
   */
  storm(): boolean {
    const { fleet, book, rng } = this.#o;
    const ready = fleet.ready();
    if (ready.length === 0) return false;
    const kind = rng.weighted({ fresh: 50, inFlight: 25, answered: 25 });
    let intent: Intent | undefined;
    if (kind === "inFlight") intent = rng.pick([...this.#calls.values()].filter((c) => c.primary).map((c) => c.intent));
    if (kind === "answered") {
      for (let i = 0; i < 5 && intent?.status !== "answered"; i++) intent = rng.pick(book.intents);
      if (intent?.status !== "answered") intent = undefined;
    }
    const fresh = intent === undefined && this.#canMint();
    if (fresh) intent = book.mint();
    if (!intent) return false;
    const clients = 2 + rng.below(4);
    ready.forEach((w, i) => {
      if (intent) this.#call(w, intent, clients, fresh && i === 0);
    });
    return true;
  }

  /**
   * A zombie round: mint a fulfilment intent and send it to `worker`; the
   * first attempt of it that reaches `point` freezes its worker there.
   */
  zombie(worker: WorkerProcess, point: string): Intent {
    const intent = this.#o.book.mint("fulfilment");
    intent.freezeAt = point;
    this.#call(worker, intent, 1, true);
    return intent;
  }

  /** A worker answered. */
  onResult(callId: number, outcomes: readonly ClientOutcome[]): void {
    const call = this.#calls.get(callId);
    if (!call) return;
    this.#calls.delete(callId);
    clearTimeout(call.timer);
    for (const outcome of outcomes) this.#o.book.observe(call.intent, outcome);
    const first = outcomes[0];
    if (call.primary && !call.superseded && first) this.#react(call.intent, first);
  }

  /** A worker died with these calls outstanding: each client retries, or gives up. */
  onWorkerExit(_worker: WorkerProcess, callIds: readonly number[]): void {
    const { book, rng, leaseMs } = this.#o;
    for (const id of callIds) {
      const call = this.#calls.get(id);
      if (!call) continue;
      this.#calls.delete(id);
      clearTimeout(call.timer);
      if (!call.primary || call.superseded) continue;
      // A zombie round's intent is never given up before its freeze: the round waits for it.
      if (call.intent.freezeAt === undefined && rng.chance(GIVE_UP_ON_DEATH)) book.setStatus(call.intent, "abandoned");
      else this.#retry(call.intent, rng.between(0, leaseMs));
    }
  }

  /** Stop minting, cancel pending retries and give up on every open intent. */
  abandonAll(): void {
    this.#minting = false;
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
    for (const call of this.#calls.values()) clearTimeout(call.timer);
    for (const intent of this.#o.book.intents) this.#o.book.setStatus(intent, "abandoned");
  }

  #canMint(): boolean {
    const limit = Math.min(this.#o.target, this.#o.mintLimit());
    return this.#minting && this.#o.book.intents.length < limit;
  }

  #call(worker: WorkerProcess, intent: Intent, clients: number, primary: boolean): void {
    const callId = this.#nextCall++;
    const call: Call = { intent, primary, superseded: false };
    if (primary) {
      intent.tries++;
      this.#o.book.setStatus(intent, "calling");
      // A healthy call takes milliseconds; one that outlives its lease sits on a paused worker or a dead server.
      call.timer = setTimeout(() => {
        call.superseded = true;
        this.#retry(intent, 0);
      }, this.#o.leaseMs * 1.2);
    }
    this.#calls.set(callId, call);
    const { input, tenantId, key, workflow, freezeAt } = intent;
    const message = { type: "run", callId, workflow, tenantId, key, input, clients } as const;
    this.#o.fleet.send(worker, freezeAt === undefined ? message : { ...message, freezeAt });
  }

  #react(intent: Intent, outcome: ClientOutcome): void {
    const { rng } = this.#o;
    if (outcome.kind === "response") {
      this.#o.book.setStatus(intent, "answered");
      return;
    }
    // Honour Retry-After on a 409; back off a little on anything else.
    const delay =
      outcome.code === "key_in_progress"
        ? (outcome.retryAfterMs ?? 0) + rng.between(20, 200)
        : outcome.code === "lease_lost"
          ? rng.between(50, 300)
          : outcome.code === "database_unavailable"
            ? rng.between(100, 600)
            : rng.between(200, 1000);
    this.#retry(intent, delay);
  }

  #retry(intent: Intent, delayMs: number): void {
    const { book } = this.#o;
    if (intent.status === "answered" || intent.status === "abandoned") return;
    if (intent.tries >= MAX_TRIES || !this.#minting) {
      book.setStatus(intent, "abandoned");
      return;
    }
    book.setStatus(intent, "retrying");
    const timer = setTimeout(() => {
      this.#retryTimers.delete(timer);
      this.#due.push(intent);
      this.dispatch();
    }, delayMs);
    this.#retryTimers.add(timer);
  }
}
