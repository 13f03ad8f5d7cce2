import type { Engine, ScheduleRecord } from "@idempo/core";
import type { Plan } from "./billing-tables.js";
import { PLAN_PRICES } from "./billing-tables.js";
import type { BillingWorkflows } from "./workflows.js";

/** Every plan renews at midnight UTC on the first of the month. */
const MONTHLY = "0 0 1 * *";

/**
 * Register one monthly schedule per plan, each starting a `billPlan` run
 * at every tick with the plan and the tick's instant as its period. Call it
 * at the start of every process that runs workers: the same definition
 * again keeps each schedule's place in time, neither skipping nor
 * repeating a tick, and only a process that registered the input function
 * fires the schedule.
 *
 * @returns the schedules as stored, with their next tick.
 */
export async function registerPlanSchedules(
  engine: Engine,
  flows: BillingWorkflows,
  tenantId: string,
): Promise<ScheduleRecord[]> {
  const records: ScheduleRecord[] = [];
  for (const plan of Object.keys(PLAN_PRICES) as Plan[]) {
    records.push(
      await engine.schedule(`renew-${plan}`, {
        cron: MONTHLY,
        timezone: "UTC",
        workflow: flows.billPlan,
        tenantId,
        input: (tick) => ({ plan, period: tick.at.toISOString() }),
      }),
    );
  }
  return records;
}
