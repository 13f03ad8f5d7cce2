import type { Workflow } from "@idempo/core";
import type { WorkflowName } from "../protocol.ts";
import type { FakeProvider } from "../provider.ts";
import { declines } from "../provider.ts";
import { checkoutWorkflow, RECEIPT_TOPIC } from "./checkout.ts";
import { fulfilmentWorkflow, INVOICE_TOPIC, WEBHOOK_TOPIC } from "./fulfilment.ts";

// biome-ignore lint/suspicious/noExplicitAny: the driver and workers run both workflows through one table
export type AnyWorkflow = Workflow<any, any>;

/** Both workflows, bound to one provider connection. */
export function buildWorkflows(provider: FakeProvider): Record<WorkflowName, AnyWorkflow> {
  return { checkout: checkoutWorkflow(provider), fulfilment: fulfilmentWorkflow(provider) };
}

/** What one finished intent must have left behind, written out independently of the definitions. */
export interface Expectation {
  /** Phases that commit: one ledger row each. */
  readonly phases: readonly string[];
  /** Phases that must never commit (after a stored failure): no ledger row. */
  readonly skipped: readonly string[];
  /** Steps: one provider operation each, under the step's derived key. */
  readonly steps: readonly string[];
  /** Outbox topics: one message each, delivered. */
  readonly topics: readonly string[];
  /** The stored response. */
  readonly outcome: "succeeded" | "failed";
  readonly status: number;
}

const PLANS: Readonly<Record<WorkflowName, Expectation>> = {
  checkout: {
    phases: ["create_order", "record_charge"],
    skipped: [],
    steps: ["charge"],
    topics: [RECEIPT_TOPIC],
    outcome: "succeeded",
    status: 201,
  },
  fulfilment: {
    phases: ["reserve", "allocate", "invoice", "settle", "close"],
    skipped: [],
    steps: ["charge", "ship", "notify"],
    topics: [INVOICE_TOPIC, WEBHOOK_TOPIC],
    outcome: "succeeded",
    status: 200,
  },
};

/** A checkout whose card the provider declines: the 402 is stored; the charge is never recorded, no receipt. */
const DECLINED_CHECKOUT: Expectation = {
  phases: ["create_order"],
  skipped: ["record_charge"],
  steps: ["charge"],
  topics: [],
  outcome: "failed",
  status: 402,
};

/** What an intent of `workflow` with `input` must leave behind. */
export function expectationFor(workflow: WorkflowName, input: Readonly<Record<string, string | number>>): Expectation {
  return workflow === "checkout" && declines(Number(input.amountCents)) ? DECLINED_CHECKOUT : PLANS[workflow];
}

/** Every hook point a run of either workflow passes, for kills armed at a boundary. */
export const HOOK_POINTS: readonly string[] = [
  ...new Set(
    Object.values(PLANS).flatMap((e) => [
      ...e.phases.flatMap((p) => [`before:phase:${p}`, `after:phase:${p}`]),
      ...e.steps.flatMap((s) => [`before:step:${s}`, `called:step:${s}`, `after:step:${s}`]),
      ...e.topics.map((t) => `delivered:outbox:${t}`),
    ]),
  ),
];

/** Every outbox topic, for the relays. */
export const TOPICS: readonly string[] = Object.values(PLANS).flatMap((e) => e.topics);

/**
 * Where a zombie round freezes a run: before a fulfilment phase that has
 * neither a unique constraint nor an outbox message. There, a zombie's
 * phase commit that fencing failed to refuse leaves a second ledger row
 * (and a second reservation) instead of an error, so the check counts it.
 */
export const ZOMBIE_POINTS: readonly string[] = ["before:phase:reserve", "before:phase:allocate", "before:phase:close"];
