/**
 * The fake provider: payments, a carrier and a partner API behind one
 * Stripe-like idempotent endpoint. Its memory is a table, not a process, so
 * it survives every worker the driver kills and is the ground truth for
 * "one charge per intent": calls may repeat, operations may not.
 *
 * Like a real network service it sometimes fails: a 503 before it does
 * anything, or a 503 after it made the charge (the answer was lost on the
 * way back), which leaves the caller in doubt. And like a real card
 * network it declines some charges, by a rule the suite can recompute.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";

/** The fields the provider compares when a key comes back. */
type ProviderParams = Readonly<Record<string, string | number>>;

export interface ProviderRequest {
  readonly service: "payments" | "carrier" | "partner";
  readonly tenantId: string;
  /** The run's own idempotency key, so the suite can count operations per intent. */
  readonly intentKey: string;
  readonly step: string;
  readonly params: ProviderParams;
}

/** An error answer; `status >= 500` may pass on a retry with the same key. */
class ProviderError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ProviderError";
  }
}

/** Retry a step call only on the provider's own 5xx answers. */
export const retryableProviderError = (error: unknown): boolean =>
  error instanceof ProviderError && error.status >= 500;

/** The provider's answer: the id of the operation, and whether it was a declined charge. */
export interface Answer {
  readonly id: string;
  readonly declined: boolean;
}

/** A payment of this amount is declined, every time (about 2 % of amounts). */
export const declines = (amountCents: number): boolean => amountCents % 50 === 13;

/** How often the provider fails on purpose. */
export interface ProviderFaults {
  /** Probability of a 503 before anything happens. */
  readonly before: number;
  /** Probability of a 503 after the operation was made (the answer is lost). */
  readonly after: number;
}

export class FakeProvider {
  readonly #pool: pg.Pool;
  readonly #faults: ProviderFaults;

  constructor(pool: pg.Pool, faults: ProviderFaults = { before: 0, after: 0 }) {
    this.#pool = pool;
    this.#faults = faults;
  }

  /**
   * Perform `request` at most once per `idempotencyKey`; answers with the
   * operation, the original one when the key was seen before.
   * @throws ProviderError 400 when the key was used with other parameters; 503 at random.
   */
  async call(idempotencyKey: string, request: ProviderRequest, signal: AbortSignal): Promise<Answer> {
    signal.throwIfAborted();
    await this.#pool.query("INSERT INTO provider.calls (idempotency_key, step) VALUES ($1, $2)", [
      idempotencyKey,
      request.step,
    ]);
    if (Math.random() < this.#faults.before) throw new ProviderError(503, "provider unavailable");
    const params = JSON.stringify(Object.entries(request.params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const declined = request.service === "payments" && declines(Number(request.params.amountCents));
    const id = `${declined ? "dec" : request.service.slice(0, 3)}_${randomUUID()}`;
    // Two statements, not one: under READ COMMITTED a single statement's
    // snapshot may not see the row a concurrent caller just committed, and
    // a zombie and its successor can call with one key at the same time.
    const created = await this.#pool.query(
      `INSERT INTO provider.operations (idempotency_key, service, tenant_id, intent_key, step, params, result_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (idempotency_key) DO NOTHING RETURNING result_id`,
      [idempotencyKey, request.service, request.tenantId, request.intentKey, request.step, params, id],
    );
    let resultId: string;
    if (created.rowCount === 1) {
      resultId = id;
    } else {
      const known = await this.#pool.query<{ params: string; result_id: string }>(
        "SELECT params, result_id FROM provider.operations WHERE idempotency_key = $1",
        [idempotencyKey],
      );
      const row = known.rows[0];
      if (!row) throw new ProviderError(500, `operation under ${idempotencyKey} vanished`);
      if (row.params !== params) {
        throw new ProviderError(400, `idempotency key reused with other parameters: ${row.params} vs ${params}`);
      }
      resultId = row.result_id;
    }
    if (Math.random() < this.#faults.after) throw new ProviderError(503, "provider answer lost");
    return { id: resultId, declined: resultId.startsWith("dec_") };
  }

  /** The operation made under `idempotencyKey`, if any: what a step's `reconcile` asks. */
  async lookup(idempotencyKey: string): Promise<string | undefined> {
    const { rows } = await this.#pool.query<{ result_id: string }>(
      "SELECT result_id FROM provider.operations WHERE idempotency_key = $1",
      [idempotencyKey],
    );
    return rows[0]?.result_id;
  }
}
