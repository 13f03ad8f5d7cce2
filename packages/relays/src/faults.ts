/**
 * Fault injection for the package's own crash tests: a hook called at the
 * instants where a relay process may die (publish sent but not confirmed,
 * confirmed but not yet reported). Not exported from any entry point; the
 * test fixtures import it by path. Unset, it costs one property read.
 */

/** The instants a test can stop a delivery at. */
export type FaultPoint = "amqp:published" | "amqp:confirmed" | "nats:published" | "nats:acked";

type Hook = (point: FaultPoint, deliveryKey: string) => Promise<void> | void;

let hook: Hook | undefined;

/** Install (or with `undefined`, remove) the process's fault hook. */
export function setFaultHook(next: Hook | undefined): void {
  hook = next;
}

export async function fault(point: FaultPoint, deliveryKey: string): Promise<void> {
  await hook?.(point, deliveryKey);
}
