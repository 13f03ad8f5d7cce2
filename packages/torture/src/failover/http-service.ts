/**
 * The HTTP example's service (examples/http-service, a payments API on
 * Hono with `@idempo/http`) as a process of its own on the failover
 * cluster, and its callers: each intent is a `POST /v1/charges` with an
 * Idempotency-Key minted before the first try and sent on every retry,
 * as a client of a payments API does. A 409 waits its Retry-After, a 5xx
 * or a broken connection backs off, and an answer (201, or a stored 402
 * decline) is final. The service process is started once and must never
 * need a restart.
 */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Random } from "../random.ts";

const SERVICE_DIR = fileURLToPath(new URL("../../../../examples/http-service", import.meta.url));
const SERVICE_MAIN = `${SERVICE_DIR}/src/main.ts`;
/** The example's API keys and the account (tenant) each is for. */
const ACCOUNTS = [
  { apiKey: "sk_test_acme", tenant: "acme" },
  { apiKey: "sk_test_globex", tenant: "globex" },
] as const;
/** Most a caller waits for one request before it gives up on it and sends the same key again. */
const REQUEST_TIMEOUT_MS = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The running service. */
export interface HttpService {
  readonly url: string;
  readonly child: ChildProcess;
  /** Its stderr, for a failure's log. */
  readonly stderr: () => string;
  /** Exits of the process (a crash, or a stop): must be 0 until `stop`. */
  readonly exits: () => number;
  stop(): Promise<void>;
}

/** Start the service on `databaseUrl` (its own database) on a free port of 127.0.0.1; resolves once it listens. */
export async function startHttpService(databaseUrl: string): Promise<HttpService> {
  const child = fork(SERVICE_MAIN, [], {
    cwd: SERVICE_DIR,
    execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: "0", NETWORK_DELAY_MS: "20" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  let stderr = "";
  let exits = 0;
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });
  child.once("exit", () => {
    exits++;
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`the HTTP service did not start:\n${stderr}`)), 60_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const found = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (found?.[1]) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the HTTP service exited (${code ?? signal}) before it listened:\n${stderr}`));
    });
  });
  return {
    url,
    child,
    stderr: () => stderr,
    exits: () => exits,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

/** One charge a caller means to make once. */
export interface Charge {
  readonly tenant: string;
  readonly apiKey: string;
  readonly key: string;
  readonly amount: number;
  /** The first answer (201 or 402) and its body, as the caller got them. */
  answer?: { readonly status: number; readonly body: unknown };
}

/** What the callers saw on the way. */
export interface CallerTally {
  requests: number;
  /** 409 key_in_progress, waited out. */
  inProgress: number;
  /** 5xx answers (503 database_unavailable during a failover). */
  unavailable: number;
  /** Requests that failed or timed out without an answer (the service is up; the answer never came). */
  noAnswer: number;
  /** Answers other than 201, 402, 409 and 5xx: a broken promise. */
  unexpected: string[];
}

/** Mint `count` charges, alternating between the example's two accounts. */
export function mintCharges(count: number, rng: Random, prefix: string): Charge[] {
  return Array.from({ length: count }, (_, i) => {
    const account = ACCOUNTS[i % ACCOUNTS.length] as (typeof ACCOUNTS)[number];
    // Now and then an amount ending in 02: the example's card network declines it (a stored 402).
    const amount = rng.chance(0.05) ? 100 * (1 + rng.below(40)) + 2 : 100 + rng.below(9_000);
    return { tenant: account.tenant, apiKey: account.apiKey, key: `${prefix}-${i}`, amount };
  });
}

/** POST the charge once; the answer, or why there was none. */
export async function postCharge(
  url: string,
  c: Charge,
): Promise<{ status: number; body: unknown; replayed: boolean; retryAfterMs: number } | { failed: string }> {
  try {
    const res = await fetch(`${url}/v1/charges`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${c.apiKey}`,
        "content-type": "application/json",
        "idempotency-key": c.key,
      },
      body: JSON.stringify({ amount: c.amount, currency: "eur" }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    const body: unknown = text === "" ? null : JSON.parse(text);
    const retryAfter = Number(res.headers.get("retry-after") ?? "0");
    return {
      status: res.status,
      body,
      replayed: res.headers.get("idempotent-replayed") === "true",
      retryAfterMs: Number.isFinite(retryAfter) ? retryAfter * 1000 : 0,
    };
  } catch (error) {
    return { failed: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Call until the charge has its answer (or `deadline()`, ms since the epoch,
 * passes: only a hang reaches it). Every try sends the same key.
 */
export async function chargeUntilAnswered(
  url: string,
  c: Charge,
  tally: CallerTally,
  deadline: () => number,
): Promise<void> {
  let backoff = 100;
  while (c.answer === undefined && Date.now() < deadline()) {
    tally.requests++;
    const res = await postCharge(url, c);
    if ("failed" in res) {
      tally.noAnswer++;
    } else if (res.status === 201 || res.status === 402) {
      c.answer = { status: res.status, body: res.body };
      return;
    } else if (res.status === 409) {
      tally.inProgress++;
      await sleep(Math.max(50, Math.min(res.retryAfterMs, 5_000)) + Math.random() * 100);
      continue;
    } else if (res.status >= 500) {
      tally.unavailable++;
    } else {
      tally.unexpected.push(`${c.tenant}/${c.key}: ${res.status} ${JSON.stringify(res.body)}`);
      return;
    }
    await sleep(backoff * (0.5 + Math.random()));
    backoff = Math.min(1_000, backoff * 2);
  }
}
