/**
 * The fan-out scenario's verdict from ground truth in PostgreSQL: each
 * parent completed once with the answers of its branches, its fee and its
 * children; each child there exactly once (one per transfer, with the
 * input the parent gave it) and completed with its transfer; each phase
 * committed once (the ledger), each branch and step made one provider
 * operation under its derived key.
 */
import { deriveChildKey, deriveStepKey } from "@idempo/core";
import type pg from "pg";
import type { FanoutMode, Limit } from "../workflows/fan-out.ts";
import { CHECKS, childName, parentName, transfersOf } from "../workflows/fan-out.ts";
import type { Findings } from "./durable-context.ts";

/** One parent the driver enqueued. */
export interface Batch {
  readonly tenantId: string;
  readonly key: string;
  readonly max: Limit;
  readonly input: { readonly batch: string; readonly merchant: string; readonly transfers: number };
}

/** A run as the verdict reads it. */
export interface RunRow {
  readonly tenant_id: string;
  readonly key: string;
  readonly workflow: string;
  readonly status: string;
  readonly outcome: string | null;
  readonly response_status: number | null;
  readonly body: string | null;
  readonly input: string;
  readonly attempt: number;
  /** The parent's key and the child's place in its `.map`, for a child the engine made. */
  readonly parent_key: string | null;
  readonly child_index: number | null;
}

/** The counts of the verdict; the problems go to `findings`. */
export interface FanoutVerdict {
  duplicateEffects: number;
  lostIntents: number;
  takeovers: number;
  children: number;
  providerCalls: number;
  providerOperations: number;
}

const id = (...parts: string[]) => parts.join("\u0000");

/**
 * Judge every batch. `childrenOf` answers the child runs the engine made
 * for a parent (by key in `enqueue` mode, by the parent link in `map`
 * mode); `strays` are child-workflow runs that belong to no parent.
 */
export async function judgeFanout(
  pool: pg.Pool,
  mode: FanoutMode,
  batches: readonly Batch[],
  runs: readonly RunRow[],
  childrenOf: (batch: Batch) => readonly RunRow[],
  strays: readonly RunRow[],
  findings: Findings,
): Promise<FanoutVerdict> {
  const v: FanoutVerdict = {
    duplicateEffects: 0,
    lostIntents: 0,
    takeovers: 0,
    children: 0,
    providerCalls: 0,
    providerOperations: 0,
  };
  const effects = new Map(
    (
      await pool.query<{ tenant_id: string; key: string; phase: string; n: number }>(
        "SELECT tenant_id, key, phase, count(*)::int AS n FROM shop.effects GROUP BY 1, 2, 3",
      )
    ).rows.map((r) => [id(r.tenant_id, r.key, r.phase), r.n]),
  );
  const operations = new Map<string, { idempotency_key: string; result_id: string }[]>();
  const { rows: ops } = await pool.query<{
    tenant_id: string;
    intent_key: string;
    step: string;
    idempotency_key: string;
    result_id: string;
  }>("SELECT tenant_id, intent_key, step, idempotency_key, result_id FROM provider.operations");
  for (const op of ops) {
    const k = id(op.tenant_id, op.intent_key, op.step);
    operations.set(k, [...(operations.get(k) ?? []), op]);
  }
  v.providerOperations = ops.length;
  v.providerCalls = (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM provider.calls")).rows[0]?.n ?? 0;
  for (const r of runs) v.takeovers += Math.max(0, r.attempt - 1);

  /** The one ledger row of `phase`; a count other than 1 is a duplicate or a loss. */
  const once = (where: string, tenantId: string, key: string, phase: string) => {
    const n = effects.get(id(tenantId, key, phase)) ?? 0;
    if (n > 1) v.duplicateEffects += n - 1;
    if (n !== 1) findings.note(`${where}: ${phase} committed ${n} times`);
    return n >= 1;
  };
  /** The one operation of `step` under `expectedKey`; answers its id. */
  const operation = (where: string, tenantId: string, key: string, step: string, expectedKey: string) => {
    const found = operations.get(id(tenantId, key, step)) ?? [];
    if (found.length > 1) {
      v.duplicateEffects += found.length - 1;
      findings.note(`${where}: ${found.length} provider operations for ${step}`);
    }
    const op = found[0];
    if (!op) return undefined;
    if (op.idempotency_key !== expectedKey) {
      findings.violation(`${where}: ${step} called under ${op.idempotency_key}, its derived key is ${expectedKey}`);
    }
    return op.result_id;
  };
  const byKey = new Map(runs.map((r) => [id(r.tenant_id, r.key), r]));

  for (const b of batches) {
    const where = `${b.tenantId}/${b.key}`;
    const parent = parentName(b.max);
    const run = byKey.get(id(b.tenantId, b.key));
    let complete = run?.status === "completed" && run.outcome === "succeeded" && run.response_status === 200;
    complete = once(where, b.tenantId, b.key, "open") && complete;
    complete = once(where, b.tenantId, b.key, "close") && complete;
    const checks = CHECKS.map((c) =>
      operation(where, b.tenantId, b.key, c, deriveStepKey(b.tenantId, b.key, parent, "checks", c)),
    );
    const fee = operation(where, b.tenantId, b.key, "fee", deriveStepKey(b.tenantId, b.key, parent, "fee"));
    if (checks.some((c) => c === undefined) || fee === undefined) complete = false;
    const body = JSON.parse(run?.body ?? "null") as { checks?: unknown; feeId?: unknown; transfers?: unknown } | null;
    if (
      run?.status === "completed" &&
      (JSON.stringify(body?.checks) !== JSON.stringify(checks) || body?.feeId !== fee)
    ) {
      findings.violation(`${where}: its response ${run.body} disagrees with its provider operations`);
    }
    const collected: (string | null)[] = [];

    // Each child exactly once, with the input its parent gave it, completed with its one transfer.
    const expected = transfersOf(b.input);
    const children = childrenOf(b);
    v.children += children.length;
    const seen = new Map<number, RunRow>();
    for (const c of children) {
      const input = JSON.parse(c.input) as { index: number };
      const twin = seen.get(input.index);
      if (twin) {
        v.duplicateEffects++;
        findings.note(`${where}: transfer ${input.index} has two children, ${twin.key} and ${c.key}`);
        continue;
      }
      seen.set(input.index, c);
      if (mode === "map") {
        const key = deriveChildKey(b.tenantId, b.key, parent, "transfers", input.index);
        if (c.key !== key || c.child_index !== input.index) {
          findings.violation(`${where}: child ${c.key} #${c.child_index} of transfer ${input.index}, expected ${key}`);
        }
      }
      const want = expected[input.index];
      if (JSON.stringify(JSON.parse(c.input)) !== JSON.stringify(want)) {
        findings.violation(`${where}: child ${c.key} has input ${c.input}, expected ${JSON.stringify(want)}`);
      }
      const cw = `${c.tenant_id}/${c.key}`;
      let childDone = c.status === "completed" && c.response_status === 201 && c.workflow === childName(b.max);
      childDone = once(cw, c.tenant_id, c.key, "book") && childDone;
      const transfer = operation(
        cw,
        c.tenant_id,
        c.key,
        "transfer",
        deriveStepKey(c.tenant_id, c.key, childName(b.max), "transfer"),
      );
      collected[input.index] = transfer ?? null;
      const answer = JSON.parse(c.body ?? "null") as { index?: number; transferId?: string } | null;
      if (c.status === "completed" && (answer?.index !== input.index || answer?.transferId !== transfer)) {
        findings.violation(`${cw}: its response ${c.body} disagrees with its transfer ${transfer}`);
      }
      if (!childDone || transfer === undefined) {
        v.lostIntents++;
        findings.note(`${cw}: not completed with its transfer (status ${c.status}, response ${c.response_status})`);
      }
    }
    for (const t of expected) {
      if (!seen.has(t.index)) {
        v.lostIntents++;
        findings.note(`${where}: transfer ${t.index} has no child`);
      }
    }
    // Fanned in: the parent answered with every child's transfer, in input order.
    const fannedIn = mode === "map" ? collected : [];
    if (run?.status === "completed" && JSON.stringify(body?.transfers) !== JSON.stringify(fannedIn)) {
      findings.violation(
        `${where}: it collected ${JSON.stringify(body?.transfers)}, its children made ${JSON.stringify(fannedIn)}`,
      );
    }
    if (!complete) {
      v.lostIntents++;
      findings.note(`${where}: not completed as expected (status ${run?.status}, response ${run?.response_status})`);
    }
  }
  for (const s of strays) {
    v.duplicateEffects++;
    findings.note(`${s.tenant_id}/${s.key}: a child run of no parent`);
  }
  return v;
}
