/**
 * How `engine.wait` and `runOnce`'s `waitInFlightMs` wait between polls
 * without holding a pooled connection: a timer, cut short by the completion
 * NOTIFY of the run waited for when the engine has a listening connection.
 */
import { completionTag, DONE_CHANNEL } from "../../store/notify-channels.js";
import type { ListenCheckOptions } from "../background/listen-options.js";
import { ListenSession } from "../background/listen-session.js";
import type { NotificationSource } from "../background/notifications.js";

/** One caller's watch on one run: pause until woken or the time passed. */
export interface Watch {
  /** Resolve after `ms`, or earlier when the run's completion was announced since the last pause. */
  pause(ms: number): Promise<void>;
  close(): void;
}

/** The engine's waiters, sharing one subscription. */
export interface CompletionWaiter {
  watch(tenantId: string, key: string): Watch;
}

/** First pause between polls in ms; each next one doubles, up to {@link MAX_PAUSE_MS}. */
export const FIRST_PAUSE_MS = 25;
/** Longest pause between polls in ms: without NOTIFY, a completion is seen within about this. */
export const MAX_PAUSE_MS = 1_000;

/**
 * The waiters' subscription lives as long as the engine (it has no stop): a
 * lost connection is reported through `onError` once, and with a pool
 * LISTEN comes back on a new connection, told through `onBack`.
 */
export function completionWaiter(
  source: NotificationSource | undefined,
  checks: Required<ListenCheckOptions>,
  onError: (e: unknown) => void,
  onBack: () => void,
): CompletionWaiter {
  const watching = new Map<string, Set<() => void>>();
  const wakeAll = () => {
    for (const set of watching.values()) for (const wake of set) wake();
  };
  if (source) {
    const session = new ListenSession(
      {
        source,
        channel: DONE_CHANNEL,
        listener: "engine.wait",
        checkMs: checks.listenCheckMs,
        answerTimeoutMs: checks.answerTimeoutMs,
        onNotify: (tag) => {
          for (const wake of watching.get(tag) ?? []) wake();
        },
        onLost: onError,
        // Completions announced while it was down are lost: every waiter looks again now.
        onBack: () => {
          onBack();
          wakeAll();
        },
        onError,
      },
      "createEngine",
    );
    void session.start();
  }
  return {
    watch(tenantId, key) {
      const tag = completionTag(tenantId, key);
      let woken = false;
      let release: (() => void) | undefined;
      const wake = () => {
        woken = true;
        release?.();
      };
      let set = watching.get(tag);
      if (!set) {
        set = new Set();
        watching.set(tag, set);
      }
      set.add(wake);
      return {
        pause(ms) {
          return new Promise<void>((resolve) => {
            if (woken) {
              woken = false;
              return resolve();
            }
            const timer = setTimeout(done, Math.max(0, ms));
            function done() {
              clearTimeout(timer);
              release = undefined;
              woken = false;
              resolve();
            }
            release = done;
          });
        },
        close() {
          release?.();
          const current = watching.get(tag);
          current?.delete(wake);
          if (current?.size === 0) watching.delete(tag);
        },
      };
    },
  };
}
