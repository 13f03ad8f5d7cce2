/**
 * The messages between the driver and its worker processes (Node IPC, JSON).
 * A worker is a client fleet and an app server in one: the driver tells it
 * which key to call `runOnce` with and how many clients to fire at once, and
 * the worker answers with what each client saw.
 */

/** The two workflows the suite runs. */
export type WorkflowName = "checkout" | "fulfilment";

/** What a worker needs to start: where the database is and how short its leases are. */
export interface WorkerConfig {
  /** 1-based worker slot; a replacement for a killed worker gets a new one. */
  readonly index: number;
  readonly databaseUrl: string;
  readonly leaseMs: number;
  /** Run `engine.startWorker` (resumeStale in the background) in this process. */
  readonly resumer: boolean;
  /** Relay claim length in ms: how soon a killed relay's messages come back. */
  readonly relayLeaseMs: number;
  /**
   * Give the relay and the resumer a LISTEN source (a pool of one of their
   * own, which they reconnect through after a failover); else they poll.
   */
  readonly listen: boolean;
}

/** Driver to worker. */
export type DriverMessage =
  | {
      readonly type: "run";
      readonly callId: number;
      readonly workflow: WorkflowName;
      readonly tenantId: string;
      readonly key: string;
      readonly input: Record<string, string | number>;
      /** Concurrent clients firing this same request (a duplicate storm when > 1). */
      readonly clients: number;
      /** A zombie round: when this run reaches this hook point, report `frozen` and SIGSTOP yourself there. */
      readonly freezeAt?: string;
    }
  /** SIGKILL yourself the next time any run or delivery reaches this hook point. */
  | { readonly type: "arm"; readonly point: string }
  /**
   * A zombie round: hold every attempt of this key after `afterAttempt` (the
   * zombie's successor) at the first boundary it reaches, report `held`, and
   * wait there for `release`.
   */
  | { readonly type: "hold"; readonly tenantId: string; readonly key: string; readonly afterAttempt: number }
  | { readonly type: "release"; readonly tenantId: string; readonly key: string };

/** What one client saw. `text` is the body exactly as the client would serialise it. */
export type ClientOutcome =
  | { readonly kind: "response"; readonly status: number; readonly text: string; readonly replayed: boolean }
  | {
      readonly kind: "error";
      readonly code: string;
      readonly message: string;
      readonly retryAfterMs?: number;
      /** A 503 that names something that may have committed (`DatabaseUnavailableError.inDoubt`). */
      readonly inDoubt?: boolean;
    };

/** Worker to driver. */
export type WorkerMessage =
  | { readonly type: "ready" }
  | { readonly type: "result"; readonly callId: number; readonly outcomes: readonly ClientOutcome[] }
  /** A background resumeStale or relay lost a fenced write. */
  | { readonly type: "fenced"; readonly count: number }
  /** This worker stops itself now (SIGSTOP) at `point` of attempt `attempt` of the key: the zombie-to-be. */
  | {
      readonly type: "frozen";
      readonly tenantId: string;
      readonly key: string;
      readonly point: string;
      readonly attempt: number;
    }
  /** The zombie's successor waits at `point`, owning the key. */
  | {
      readonly type: "held";
      readonly tenantId: string;
      readonly key: string;
      readonly point: string;
      readonly attempt: number;
    }
  /** The woken zombie has tried its write: it reached its next boundary, or its call ended (`how`). */
  | { readonly type: "zombie-tried"; readonly tenantId: string; readonly key: string; readonly how: string };
