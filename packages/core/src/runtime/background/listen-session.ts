/**
 * One LISTEN subscription kept honest: a round trip (`SELECT 1`) on the
 * listening connection every `checkMs`, which must be answered within
 * `answerTimeoutMs`. A connection that fails, ends, or stops answering
 * without an error (half-open: a network black hole sends no reset) is
 * reported once, its socket destroyed so that nothing waits on it, and, when
 * the source is a pool, replaced on a later check by a new connection that
 * LISTENs again. Every wait on the database here is bounded, so `stop()`
 * returns whatever the connection does.
 */
import { ListenConnectionLostError } from "../../database-errors.js";
import { NoAnswer, within } from "./bounded-wait.js";
import type { ListenApi, ListenClient, ListenPool, Notification, NotificationSource } from "./notifications.js";
import { sourceKind } from "./notifications.js";

export interface ListenSessionOptions {
  readonly source: NotificationSource;
  /** The channel (a fixed identifier, never user input). */
  readonly channel: string;
  /** Who listens, for the errors' wording: `relay`, `worker`, `engine.wait`. */
  readonly listener: string;
  /** Interval between two checks of the connection, in ms. */
  readonly checkMs: number;
  /** The longest a check, a LISTEN or an UNLISTEN may wait for its answer, in ms. */
  readonly answerTimeoutMs: number;
  onNotify(payload: string): void;
  /** The connection was lost: once per loss, until LISTEN is back. */
  onLost(error: ListenConnectionLostError): void;
  /** LISTEN is back on a new connection after a reported loss (pools only). */
  onBack(): void;
  /** PGlite's listen or unlisten failed. */
  onError(error: unknown): void;
}

/** The connection listening now. */
interface Held {
  readonly client: ListenClient;
  /** Hand a pooled client back (destroyed after a loss); undefined for the application's own client. */
  readonly release: ((destroy: boolean) => void) | undefined;
  readonly onNotification: (message: Notification) => void;
  readonly onGone: (error?: unknown) => void;
  dead: boolean;
}

/** The events a `pg.Client` also emits when its connection fails or ends. */
interface ClientEvents {
  on(event: "error" | "end", listener: (error?: unknown) => void): unknown;
  off(event: "error" | "end", listener: (error?: unknown) => void): unknown;
}

/** Destroy a node-postgres client's socket: its waits end at once (it emits 'end'). */
function destroySocket(client: ListenClient): void {
  const stream = (client as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream;
  stream?.destroy?.();
}

export class ListenSession {
  readonly #o: ListenSessionOptions;
  readonly #kind: "pool" | "client" | "api";
  #held: Held | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  /** A loss was reported and LISTEN is not back yet. */
  #reported = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  /** A pool checkout in progress (unbounded: it runs beside the checks, never under stop()). */
  #connecting: Promise<void> | undefined;

  constructor(options: ListenSessionOptions, at: string) {
    this.#o = options;
    this.#kind = sourceKind(at, options.source);
  }

  /** LISTEN for the first time (failures are reported, not thrown), then check on every `checkMs`. */
  async start(): Promise<void> {
    const { source, channel, onNotify, onError, answerTimeoutMs } = this.#o;
    if (this.#kind === "api") {
      try {
        this.#unlisten = await within(answerTimeoutMs, (source as ListenApi).listen(channel, onNotify));
      } catch (error) {
        onError(error);
      }
      return;
    }
    if (this.#kind === "client") {
      await this.#attach(source as ListenClient, undefined);
    } else {
      // Bounded: a checkout that hangs (a black-holed network) must not hold up the first poll.
      const first = this.#checkout();
      await within(answerTimeoutMs, first).catch((error: unknown) => {
        if (error instanceof NoAnswer) this.#report("unresponsive", `did not open (${error.message})`, error);
      });
    }
    this.#schedule();
  }

  /** Stop checking and UNLISTEN, waiting at most `answerTimeoutMs` for the answer. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const { channel, answerTimeoutMs, onError } = this.#o;
    if (this.#unlisten) await within(answerTimeoutMs, this.#unlisten()).catch(onError);
    const held = this.#held;
    this.#held = undefined;
    if (!held || held.dead) return;
    this.#detach(held);
    try {
      await within(answerTimeoutMs, held.client.query(`UNLISTEN ${channel}`));
      held.release?.(false);
    } catch {
      // Unanswered (or failed): the connection is of no use to anyone, and ending it politely would wait too.
      destroySocket(held.client);
      held.release?.(true);
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#check().finally(() => this.#schedule()), this.#o.checkMs);
    // The loop's own work keeps the process alive; the check must not.
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    const held = this.#held;
    if (held) {
      try {
        await within(this.#o.answerTimeoutMs, held.client.query("SELECT 1"));
      } catch (error) {
        this.#lose(held, error);
      }
    } else if (this.#kind === "pool" && !this.#connecting) {
      void this.#checkout();
    }
  }

  /** Start a checkout and LISTEN in the background, one at a time. */
  #checkout(): Promise<void> {
    const connecting = this.#reconnect().finally(() => {
      this.#connecting = undefined;
    });
    this.#connecting = connecting;
    return connecting;
  }

  /** Check out a client from the pool and LISTEN on it. */
  async #reconnect(): Promise<void> {
    let client: ListenClient & { release(destroy?: boolean | Error): void };
    try {
      client = await (this.#o.source as ListenPool).connect();
    } catch (error) {
      this.#report("failed", `could not be opened (${messageOf(error)})`, error);
      return;
    }
    if (this.#stopped) return client.release();
    let released = false;
    const release = (destroy: boolean) => {
      if (released) return;
      released = true;
      client.release(destroy);
    };
    if (await this.#attach(client, release)) this.#back();
  }

  /** LISTEN on `client`; true when it answered. */
  async #attach(client: ListenClient, release: Held["release"]): Promise<boolean> {
    const { channel, onNotify } = this.#o;
    const held: Held = {
      client,
      release,
      onNotification: (message) => {
        if (message.channel === channel) onNotify(message.payload ?? "");
      },
      onGone: (error) => this.#lose(held, error ?? new Error("the connection ended")),
      dead: false,
    };
    const events = client as unknown as Partial<ClientEvents>;
    // Kept for good: a dead client may still emit 'error', which must never crash the process.
    events.on?.("error", held.onGone);
    events.on?.("end", held.onGone);
    client.on("notification", held.onNotification);
    this.#held = held;
    try {
      await within(this.#o.answerTimeoutMs, client.query(`LISTEN ${channel}`));
      return !held.dead;
    } catch (error) {
      this.#lose(held, error);
      return false;
    }
  }

  #detach(held: Held): void {
    held.client.off("notification", held.onNotification);
    (held.client as unknown as Partial<ClientEvents>).off?.("end", held.onGone);
  }

  /** `held` failed, ended or did not answer: drop it (destroyed), and report the loss once. */
  #lose(held: Held, error: unknown): void {
    if (held.dead) return;
    held.dead = true;
    if (this.#held === held) this.#held = undefined;
    this.#detach(held);
    destroySocket(held.client);
    held.release?.(true);
    if (this.#stopped) return; // stopped: later failures of the client are the application's business
    if (error instanceof NoAnswer) {
      this.#report("unresponsive", `stopped answering (${error.message}); its socket was destroyed`, error);
    } else {
      this.#report("failed", `was lost (${messageOf(error)})`, error);
    }
  }

  #report(reason: "unresponsive" | "failed", detail: string, cause: unknown): void {
    if (this.#reported || this.#stopped) return;
    this.#reported = true;
    const again = this.#kind === "pool" ? "; LISTEN again once the database answers" : "";
    this.#o.onLost(new ListenConnectionLostError(this.#o.listener, reason, `${detail}${again}`, { cause }));
  }

  #back(): void {
    if (!this.#reported || this.#stopped) return;
    this.#reported = false;
    this.#o.onBack();
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
