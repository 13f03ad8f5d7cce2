/**
 * The one admission routine `runOnce` and `enqueue` share: check the key and
 * the input, then claim the key, or find it taken and decide (absent past
 * retention and tombstone, another workflow or payload, refused while
 * tombstoned, or the same request), round after round while the key changes
 * under the call.
 */
import {
  IdempotencyKeyExpiredError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
} from "../../errors.js";
import { canonicalJson, fingerprintOf } from "../../json/fingerprint.js";
import type { JsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { assertValidRunKey } from "../../keys/key-validation.js";
import type { OptionShape } from "../../options/option-shape.js";
import { checkOptions } from "../../options/option-shape.js";
import type { RunStatus, Tombstone } from "../../store/run-store.js";
import type { ClaimResult } from "../../telemetry/telemetry.js";
import type { Definition } from "../../workflow/definition.js";
import { inputToJson, parsedInputHash, parseInput } from "../execution/values.js";

/** Claim rounds before giving up on a key that keeps changing under us (a 409 then). */
const CLAIM_ROUNDS = 8;

/** A request whose key and input passed: what a claim stores. */
export interface CheckedRequest {
  readonly tenantId: string;
  readonly key: string;
  /** The input as JSON, and as the workflow's schema parsed it. */
  readonly json: JsonValue;
  readonly input: unknown;
  /** Names the request: a retry with another payload or workflow is a mismatch. */
  readonly fingerprint: string;
  /** The JSON text the run stores. */
  readonly inputText: string;
  /** Hash of the schema's output; null without a schema or when that output is not JSON. */
  readonly parsedHash: string | null;
}

/**
 * Check a request before any SQL: its keys against `shape` (named `where`
 * in errors), the key, the input's JSON, its size, its schema.
 *
 * @throws InvalidOptionError (500) an unknown key in the request, or a value of the wrong type.
 * @throws InvalidIdempotencyKeyError (400) bad key or tenant.
 * @throws InputValidationError (400) input not JSON or rejected by the schema.
 * @throws PayloadTooLargeError (413) the input is over `maxPayloadBytes`.
 */
export async function checkRequest(
  def: Definition,
  request: { tenantId: string; key: string; input: unknown } | undefined,
  where: string,
  shape: OptionShape,
  maxPayloadBytes: number,
): Promise<CheckedRequest> {
  checkOptions(where, shape, request, "the request");
  assertValidRunKey(request?.tenantId, request?.key);
  const { tenantId, key } = request as NonNullable<typeof request>;
  const json = inputToJson(request?.input);
  // The canonical text the fingerprint is taken from is also what the bound measures: serialised once.
  const canonical = canonicalJson(json);
  checkPayloadSize("the input", canonical, maxPayloadBytes);
  const input = await parseInput(def, json);
  return {
    tenantId,
    key,
    json,
    input,
    fingerprint: fingerprintOf(def.name, canonical),
    inputText: JSON.stringify(json),
    parsedHash: def.schema ? parsedInputHash(input) : null,
  };
}

/** What an existing record of the key holds, as far as admission decides on it. */
export interface FoundKey {
  readonly workflow: string;
  readonly fingerprint: string;
  readonly status: RunStatus;
  /** A completed record past retention: it counts as absent, unless `tombstone` still refuses the key. */
  readonly expired: boolean;
  /** Set while the key is tombstoned: its record expired (swept or not) and its tombstone time has not passed. */
  readonly tombstone: Tombstone | null;
}

/** One insert-or-read of the key. */
export type KeyLook<F extends FoundKey> =
  | { readonly kind: "claimed" }
  | { readonly kind: "existing"; readonly run: F }
  /** A concurrent claim committed between the statement's snapshot and its insert; ask again. */
  | { readonly kind: "raced" }
  /** The key's first phase, which holds its claim, outlasted the lock timeout: in progress for about `retryAfterMs`. */
  | { readonly kind: "busy"; readonly retryAfterMs: number };

/** What a caller of {@link admit} does at each turn. */
export interface AdmissionSteps<F extends FoundKey, R> {
  /** Claim the key (a fresh run each round), or read who has it; a run may also start and end in this call. */
  claim(): Promise<KeyLook<F>>;
  /** Take a key whose completed record is past retention and tombstone; false when it changed meanwhile. */
  reclaimExpired(): Promise<boolean>;
  /** The key is this call's: start; or the ms until it may start (over a concurrency limit). */
  claimed(): Promise<R | number>;
  /** The key names this same request: answer, or "again", or the ms until its holder may let it go. */
  existing(found: F): Promise<R | "again" | number>;
  /** Another attempt holds the key for `retryAfterMs`: throw the 409, or return to look again. */
  inProgress(retryAfterMs: number): Promise<void>;
  /** Told how the claim ended when it ends in an error (for telemetry). */
  report(result: ClaimResult): void;
}

/**
 * Admit a checked request of `workflow`.
 *
 * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
 * @throws IdempotencyKeyExpiredError (410) the key's record expired and its tombstone lasts.
 * @throws IdempotencyKeyInProgressError (409) the key kept changing under the call.
 */
export async function admit<F extends FoundKey, R extends object>(
  request: CheckedRequest,
  workflow: string,
  steps: AdmissionSteps<F, R>,
): Promise<R> {
  const { tenantId, key } = request;
  const round = async (): Promise<R | "again" | number> => {
    const look = await steps.claim();
    if (look.kind === "raced") return "again";
    if (look.kind === "busy") return look.retryAfterMs;
    if (look.kind === "claimed") return steps.claimed();
    const found = look.run;
    if (found.status === "completed" && found.expired && found.tombstone === null) {
      // Past retention and tombstone the key counts as absent, swept or not.
      return (await steps.reclaimExpired()) ? steps.claimed() : "again";
    }
    if (found.workflow !== workflow) {
      steps.report("mismatch");
      throw new IdempotencyKeyMismatchError(tenantId, key, `workflow '${found.workflow}', not '${workflow}'`);
    }
    if (found.fingerprint !== request.fingerprint) {
      steps.report("mismatch");
      throw new IdempotencyKeyMismatchError(tenantId, key, "a different request payload");
    }
    if (found.tombstone !== null) {
      // Within the tombstone's time, swept or not: refused, never run again.
      steps.report("expired");
      throw new IdempotencyKeyExpiredError(tenantId, key, found.tombstone);
    }
    return steps.existing(found);
  };
  for (let n = 0; n < CLAIM_ROUNDS; n++) {
    const answer = await round();
    if (answer === "again") continue;
    if (typeof answer === "number") {
      await steps.inProgress(answer);
      n = -1;
      continue;
    }
    return answer;
  }
  steps.report("in_progress");
  throw new IdempotencyKeyInProgressError(tenantId, key, 0);
}
