/**
 * The request identity a wrapped handler's run is fingerprinted on:
 * method, route pattern, path parameters, query and body. The engine
 * hashes the workflow name and the RFC 8785 canonical JSON of this input,
 * so the same key sent to another route, another resource or with another
 * body is a mismatch (422).
 */
import { createHash } from "node:crypto";
import type { BodyFacts } from "./body.js";

/** Where a request was routed. */
export interface RouteFacts {
  /** Upper-case method. */
  readonly method: string;
  /** The route pattern (`/orders/:id`), or the concrete path when the framework cannot tell. */
  readonly route: string;
  /** Path parameters by name. */
  readonly params: Readonly<Record<string, unknown>>;
  /** The query string, without `?` (may be empty). */
  readonly search: string;
}

/** Query parameters by name; repeated names keep their order. */
function queryObject(search: string): Record<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, value] of new URLSearchParams(search)) out.set(name, [...(out.get(name) ?? []), value]);
  return Object.fromEntries(out);
}

/** The input of a wrapped run: what its fingerprint covers. */
export function wrappedInput(route: RouteFacts, body: BodyFacts): Record<string, unknown> {
  const input: Record<string, unknown> = {
    method: route.method,
    route: route.route,
    params: { ...route.params },
    query: queryObject(route.search),
  };
  if (body.kind === "value") input.body = body.value;
  if (body.kind === "bytes") input.bytes = { sha256: body.sha256, length: body.length, type: body.type };
  return input;
}

const NAME_MAX = 100;

/**
 * The workflow name of a wrapped route, `http POST /orders/:id`: what
 * operators see in `idempo keys list`. Long routes are shortened with a
 * hash; control characters (from a decoded path) are replaced.
 */
export function wrappedWorkflowName(route: RouteFacts): string {
  const name = `http ${route.method} ${route.route}`.replace(/[\u0000-\u001f\u007f-\u009f]/g, "\ufffd");
  if (name.length <= NAME_MAX) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 12);
  return `${name.slice(0, NAME_MAX - hash.length - 1)}~${hash}`;
}
