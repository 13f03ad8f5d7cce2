/**
 * A worker process: an app server and its clients in one. It runs `runOnce`
 * for whatever the driver sends (several clients at once for a storm), an
 * outbox relay, and on odd slots a background `resumeStale`. It has no
 * memory the suite relies on: the driver may SIGKILL or SIGSTOP it at any
 * moment, or tell it to SIGKILL itself at a named boundary.
 */
import { createEngine, IdempoError, IdempotencyKeyInProgressError, LeaseLostError } from "@idempo/core";
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
setFaultHook(engine, async (point) => {
  if (point === armed) process.kill(process.pid, "SIGKILL");
  // Now and then linger at a boundary, so random kills and terminations land between two writes.
  if (Math.random() < 0.05) await sleep(Math.random() * 40);
});

const fenced = (error: unknown) => {
  if (error instanceof LeaseLostError) send({ type: "fenced", count: 1 });
};

engine.startRelay({
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
  const clients = Array.from({ length: message.clients }, () => client(message));
  void Promise.all(clients).then((outcomes) => send({ type: "result", callId: message.callId, outcomes }));
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
