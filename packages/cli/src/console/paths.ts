/** URLs of console pages. Tenant ids and keys are client input: always percent-encoded. */

/** The page of one run. */
export function runPath(tenantId: string, key: string): string {
  return `/runs/${encodeURIComponent(tenantId)}/${encodeURIComponent(key)}`;
}

/** The confirmation page of a verb on one run. */
export function actionPath(verb: string, tenantId: string, key: string): string {
  return `/actions/${encodeURIComponent(verb)}/${encodeURIComponent(tenantId)}/${encodeURIComponent(key)}`;
}

/** The confirmation page of requeueing one outbox message. */
export function outboxRetryPath(tenantId: string, messageId: string): string {
  return `/actions/outbox-retry/${encodeURIComponent(tenantId)}/${encodeURIComponent(messageId)}`;
}

/** The confirmation page of pausing or resuming one schedule. */
export function scheduleActionPath(verb: "pause" | "resume", name: string): string {
  return `/actions/schedule-${verb}/${encodeURIComponent(name)}`;
}
