/**
 * The fan-out scenario's workflows, a marketplace payout batch: the parent
 * (`fanout_batch_<max>`) opens the batch (a ledger row), runs three checks as
 * `.parallel` branches (fraud, tax, stock: each a provider call under its
 * branch's derived key), takes its fee (a provider call under the shared
 * rate limit), fans out one child (`fanout_transfer_<max>`) per transfer, and
 * closes the batch (a ledger row). Each child makes its transfer (a
 * provider call under the shared rate limit) and books it (a ledger row).
 * The parent is limited per merchant and the child per seller, at most
 * `max` at once per key; the scenario runs the pair with `max` 1, 2 and 3
 * (a workflow has one `max` for all its keys). Every branch and step records in `shop.executing`
 * while it runs, so the scenario's sampler can count what executes under
 * each limit key. The provider fails now and then, before or after making
 * the operation, and the steps retry with the same key.
 */

import { workflow } from "@idempo/core";
import type pg from "pg";
import { z } from "zod";
import type { FakeProvider, ProviderRequest } from "../provider.ts";
import { retryableProviderError } from "../provider.ts";
import type { Tx } from "./effects.ts";
import { logEffect } from "./effects.ts";

/** The concurrency limits the scenario runs its workflows with, one pair of workflows each. */
export const LIMITS = [1, 2, 3] as const;
export type Limit = (typeof LIMITS)[number];
/** The parent workflow limited to `max` per merchant. */
export const parentName = (max: Limit) => `fanout_batch_${max}`;
/** The child workflow limited to `max` per seller. */
export const childName = (max: Limit) => `fanout_transfer_${max}`;
/** The rate limit every process shares: the provider's allowance for the whole fleet. */
export const FANOUT_RATE_LIMIT = "provider";
/** Its settings, the same in every process (a bucket is one row; each process refills it with its own). */
export const FANOUT_RATE = { perSecond: 15, burst: 3 } as const;
/** The merchants (the parent's limit key) and the sellers (the child's). */
export const MERCHANTS = ["m1", "m2"] as const;
const SELLERS = ["s1", "s2", "s3", "s4"] as const;
/** The parent's `.parallel` branches. */
export const CHECKS = ["fraud", "tax", "stock"] as const;
/** The steps that take a token of the shared rate limit. */
export const RATE_LIMITED_STEPS = ["fee", "transfer"] as const;

const stepOptions = { retries: 4, backoffMs: 20, retryable: retryableProviderError };

/** How the parent starts its children: `.map` (the engine), or none (the driver enqueues them by hand). */
export type FanoutMode = "map" | "enqueue";

/** The input of one transfer. */
export interface TransferInput {
  readonly batch: string;
  readonly index: number;
  readonly seller: string;
  readonly amountCents: number;
}

/** The transfers of a batch, a pure function of its input (the driver recomputes them to check). */
export function transfersOf(batch: { batch: string; transfers: number }): TransferInput[] {
  const salt = [...batch.batch].reduce((n, c) => n + c.charCodeAt(0), 0);
  return Array.from({ length: batch.transfers }, (_, index) => ({
    batch: batch.batch,
    index,
    seller: SELLERS[(salt + index) % SELLERS.length] as string,
    amountCents: 100 + ((salt * 31 + index * 17) % 900),
  }));
}

/** The limit key the engine stores for `workflow`'s `.concurrency` key `key` (see `concurrency-slot.ts`). */
export const limitKeyOf = (workflowName: string, key: string) => `${workflowName}\u001f${key}`;

/** Marks workflow code as executing in `shop.executing` while `fn` runs (see the table's comment). */
export class ExecutionMarks {
  constructor(private readonly pool: pg.Pool) {}

  /** Run `fn` with a row for the attempt of `run` under `limitKey`, deleted when it settles. */
  async during<T>(
    limitKey: string,
    run: { tenantId: string; key: string; attempt: number },
    fn: () => Promise<T>,
  ): Promise<T> {
    const { rows } = await this.pool.query<{ id: string }>(
      "INSERT INTO shop.executing (limit_key, tenant_id, key, attempt) VALUES ($1, $2, $3, $4) RETURNING id",
      [limitKey, run.tenantId, run.key, run.attempt],
    );
    try {
      return await fn();
    } finally {
      await this.pool.query("DELETE FROM shop.executing WHERE id = $1", [rows[0]?.id]).catch(() => undefined);
    }
  }
}

/** Work that takes a moment, so that attempts under one limit key overlap if the limit lets them. */
const work = (signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 15 + Math.random() * 45);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

/** The parent and child limited to `max` per key, bound to one provider and the marks' pool. */
function fanoutPair(provider: FakeProvider, marks: ExecutionMarks, mode: FanoutMode, max: Limit) {
  const names = { parent: parentName(max), child: childName(max) };
  const call = async (
    ctx: { idempotencyKey: string; signal: AbortSignal; tenantId: string; key: string },
    step: string,
    service: ProviderRequest["service"],
    params: ProviderRequest["params"],
  ): Promise<string> => {
    await work(ctx.signal);
    const answer = await provider.call(
      ctx.idempotencyKey,
      { service, tenantId: ctx.tenantId, intentKey: ctx.key, step, params },
      ctx.signal,
    );
    return answer.id;
  };

  const child = workflow(names.child, { maxAttempts: 50 })
    .input(
      z.object({
        batch: z.string(),
        index: z.number().int().min(0),
        seller: z.string(),
        amountCents: z.number().int().positive(),
      }),
    )
    .concurrency({ key: ({ input }) => input.seller, max })
    .step(
      "transfer",
      (ctx) =>
        marks.during(limitKeyOf(names.child, ctx.input.seller), ctx, async () => ({
          transferId: await call(ctx, "transfer", "payments", {
            seller: ctx.input.seller,
            amountCents: ctx.input.amountCents,
          }),
        })),
      { ...stepOptions, rateLimit: FANOUT_RATE_LIMIT, timeoutMs: 5_000 },
    )
    .phase("book", async ({ tx, ...run }) => {
      await logEffect(tx, run, names.child, "book");
    })
    .respond(({ state, input }) => ({ status: 201, body: { index: input.index, transferId: state.transferId } }));

  const merchantKey = limitKeyOf.bind(null, names.parent);
  const checks = workflow(names.parent, { maxAttempts: 50 })
    .input(z.object({ batch: z.string(), merchant: z.string(), transfers: z.number().int().min(1).max(100) }))
    .concurrency({ key: ({ input }) => input.merchant, max })
    .phase("open", async ({ tx, ...run }) => {
      await logEffect(tx, run, names.parent, "open");
    })
    .parallel(
      "checks",
      (p) =>
        p
          .step(
            "fraud",
            (ctx) =>
              marks.during(merchantKey(ctx.input.merchant), ctx, async () => ({
                id: await call(ctx, "fraud", "partner", { batch: ctx.input.batch }),
              })),
            stepOptions,
          )
          .step(
            "tax",
            (ctx) =>
              marks.during(merchantKey(ctx.input.merchant), ctx, async () => ({
                id: await call(ctx, "tax", "partner", { batch: ctx.input.batch }),
              })),
            stepOptions,
          )
          .step(
            "stock",
            (ctx) =>
              marks.during(merchantKey(ctx.input.merchant), ctx, async () => ({
                id: await call(ctx, "stock", "partner", { batch: ctx.input.batch }),
              })),
            stepOptions,
          ),
      { concurrency: 2 },
    )
    .step(
      "fee",
      (ctx) =>
        marks.during(merchantKey(ctx.input.merchant), ctx, async () => ({
          feeId: await call(ctx, "fee", "payments", { batch: ctx.input.batch, amountCents: 250 }),
        })),
      { ...stepOptions, rateLimit: FANOUT_RATE_LIMIT, timeoutMs: 5_000 },
    );
  const close = async ({ tx, ...run }: { tx: Tx; tenantId: string; key: string; attempt: number }) => {
    await logEffect(tx, run, names.parent, "close");
  };
  const summary = (input: { batch: string }, state: { checks: Record<(typeof CHECKS)[number], { id: string }> }) => ({
    batch: input.batch,
    checks: CHECKS.map((c) => state.checks[c].id),
  });
  // `map`: the parent fans out its transfers itself and collects them; `enqueue`: the driver made them.
  const parent =
    mode === "map"
      ? checks
          .map("transfers", child, ({ input }) => transfersOf(input))
          .phase("close", close)
          .respond(({ state, input }) => ({
            status: 200,
            body: {
              ...summary(input, state),
              feeId: state.feeId,
              transfers: state.transfers.map((t) => (t.outcome === "succeeded" ? t.body.transferId : null)),
            },
          }))
      : checks.phase("close", close).respond(({ state, input }) => ({
          status: 200,
          body: { ...summary(input, state), feeId: state.feeId, transfers: [] as (string | null)[] },
        }));
  return { parent, child };
}

/** Every pair of the scenario, in the order of `LIMITS`: what the driver and every worker process know. */
export function fanoutWorkflows(provider: FakeProvider, marks: ExecutionMarks, mode: FanoutMode) {
  return LIMITS.map((max) => ({ max, ...fanoutPair(provider, marks, mode, max) }));
}
