/**
 * A worker process: an app server and its clients in one. It runs `runOnce`
 * for whatever the driver sends (several clients at once for a storm), an
 * outbox relay, and on odd slots a background `resumeStale`. It has no
 * memory the suite relies on: the driver may SIGKILL or SIGSTOP it at any
 * moment, or tell it to SIGKILL itself at a named boundary.
 */
import {
  createEngine,
  DatabaseUnavailableError,
  IdempoError,
  IdempotencyKeyInProgressError,
  LeaseLostError,
} from "@idempo/core";
import { setFaultHook } from "@idempo/core/internal";
import { kyselyOn, openPool, WORKER_APP_PREFIX } from "./database.ts";
import { mailboxHandlers } from "./mailbox.ts";
import type { ClientOutcome, DriverMessage, WorkerConfig, WorkerMessage } from "./protocol.ts";
import { FakeProvider, retryableProviderError } from "./provider.ts";
import { buildWorkflows } from "./workflows/catalogue.ts";

const config = JSON.parse(process.argv[2] ?? "{}") as WorkerConfig;
const send = (message: WorkerMessage) => {
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const name = `${WORKER_APP_PREFIX}${config.index}`;
const pool = openPool(config.databaseUrl, name, 16);
const providerPool = openPool(config.databaseUrl, `${name}-provider`, 8);
const engine = createEngine({ db: kyselyOn(pool), leaseMs: config.leaseMs });
const workflows = buildWorkflows(new FakeProvider(providerPool, { before: 0.01, after: 0.01 }));

let armed: string | undefined;
const runKey = (tenantId: string, key: string) => `${tenantId}\u0000${key}`;
/** Zombie rounds: keys whose run freezes this process at a point. */
const freezes = new Map<string, string>();
/** Zombie rounds: keys whose successor attempts wait here; `afterAttempt` is the zombie's attempt. */
const holds = new Map<string, { afterAttempt: number; release: Promise<void>; open: () => void }>();
/** The attempt this process froze in, once it is awake again: its next boundary is reported. */
let zombie: { runKey: string; tenantId: string; key: string; attempt: number; point: string } | undefined;

const zombieTried = (how: string) => {
  if (!zombie) return;
  send({ type: "zombie-tried", tenantId: zombie.tenantId, key: zombie.key, how });
  zombie = undefined;
};
const sendNow = (message: WorkerMessage) =>
  new Promise<void>((resolve) => {
    if (!process.connected) return resolve();
    process.send?.(message, undefined, undefined, () => resolve());
  });

setFaultHook(engine, async (point, run) => {
  const rk = runKey(run.tenantId, run.key);
  if (zombie?.runKey === rk && zombie.attempt === run.attempt && point !== zombie.point)
    zombieTried(`reached ${point}`);
  // The successor of a frozen zombie waits here; it never freezes itself as a second zombie.
  const hold = holds.get(rk);
  if (hold && run.attempt > hold.afterAttempt) {
    send({ type: "held", tenantId: run.tenantId, key: run.key, point, attempt: run.attempt });
    await hold.release;
    return;
  }
  if (freezes.get(rk) === point) {
    freezes.delete(rk);
    zombie = { runKey: rk, tenantId: run.tenantId, key: run.key, attempt: run.attempt, point };
    // A zombie that killed itself on waking would never try its write.
    armed = undefined;
    await sendNow({ type: "frozen", tenantId: run.tenantId, key: run.key, point, attempt: run.attempt });
    // Stopped here, between two writes, with the lease running out: the driver wakes us once a successor waits.
    process.kill(process.pid, "SIGSTOP");
    return;
  }
  if (point === armed) process.kill(process.pid, "SIGKILL");
  // Now and then linger at a boundary, so random kills and terminations land between two writes.
  if (Math.random() < 0.05) await sleep(Math.random() * 40);
});

const fenced = (error: unknown) => {
  if (error instanceof LeaseLostError) send({ type: "fenced", count: 1 });
};

// A pool, not a client: after a failover the relay and the worker take a new connection and LISTEN again.
const listen = config.listen ? openPool(config.databaseUrl, `${name}-listen`, 2) : undefined;
engine.startRelay({
  ...(listen ? { listen } : {}),
  handlers: mailboxHandlers(pool),
  concurrency: 4,
  pollIntervalMs: 100,
  leaseMs: config.relayLeaseMs,
  backoffMs: 20,
  maxBackoffMs: 500,
  // Terminations make deliveries fail often; dead letters would be a suite artefact, not a finding.
  maxAttempts: 10_000,
});
if (config.resumer) {
  engine.startWorker({
    ...(listen ? { listen } : {}),
    workflows: Object.values(workflows),
    intervalMs: config.leaseMs * 2,
    sweep: false,
    onError: fenced,
  });
}

async function client(message: Extract<DriverMessage, { type: "run" }>): Promise<ClientOutcome> {
  try {
    const res = await engine.runOnce(workflows[message.workflow], {
      tenantId: message.tenantId,
      key: message.key,
      input: message.input,
    });
    return { kind: "response", status: res.status, text: JSON.stringify(res.body), replayed: res.replayed };
  } catch (error) {
    if (error instanceof IdempotencyKeyInProgressError) {
      return { kind: "error", code: error.code, message: error.message, retryAfterMs: error.retryAfterMs };
    }
    if (error instanceof DatabaseUnavailableError) {
      return { kind: "error", code: error.code, message: error.message, inDoubt: error.inDoubt !== undefined };
    }
    if (error instanceof IdempoError) return { kind: "error", code: error.code, message: error.message };
    const code = (error as { code?: unknown }).code;
    // A zombie re-running a phase its successor already committed, stopped by the invoice's or order's unique constraint.
    if (code === "23505") return { kind: "error", code: "unique_violation", message: (error as Error).message };
    // The provider's 503 outlasted the step's retries: the run stays at its recovery point, the client retries.
    if (retryableProviderError(error)) return { kind: "error", code: "provider_unavailable", message: String(error) };
    return {
      kind: "error",
      code: `unexpected:${typeof code === "string" ? code : error instanceof Error ? error.name : "unknown"}`,
      message: error instanceof Error ? error.message : String(error),
    };
  }
}

process.on("message", (message: DriverMessage) => {
  if (message.type === "arm") {
    armed = message.point;
    return;
  }
  if (message.type === "hold") {
    let open!: () => void;
    const release = new Promise<void>((resolve) => {
      open = resolve;
    });
    const rk = runKey(message.tenantId, message.key);
    holds.set(rk, { afterAttempt: message.afterAttempt, release, open });
    // A retry sent before the zombie froze may carry the freeze point: the round has its zombie already.
    freezes.delete(rk);
    return;
  }
  if (message.type === "release") {
    const rk = runKey(message.tenantId, message.key);
    holds.get(rk)?.open();
    holds.delete(rk);
    return;
  }
  const rk = runKey(message.tenantId, message.key);
  if (message.freezeAt !== undefined && !holds.has(rk)) freezes.set(rk, message.freezeAt);
  const clients = Array.from({ length: message.clients }, () => client(message));
  void Promise.all(clients).then((outcomes) => {
    // The woken zombie's call ended before it reached another boundary (its write was refused).
    if (zombie?.runKey === rk)
      zombieTried(`call ended: ${outcomes.map((o) => (o.kind === "error" ? o.code : o.status)).join(",")}`);
    freezes.delete(rk);
    send({ type: "result", callId: message.callId, outcomes });
  });
});
// The driver is gone (it exited or was killed): nobody is left to talk to. It
// may have gone while this process was still loading, before the listener existed.
process.on("disconnect", () => process.exit(0));
if (!process.connected) process.exit(0);
// Warm up the pool before taking work; while the server restarts, keep trying.
for (;;) {
  try {
    await pool.query("SELECT 1");
    break;
  } catch {
    await sleep(250);
  }
}
send({ type: "ready" });
