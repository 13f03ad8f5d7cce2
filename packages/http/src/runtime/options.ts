import type { Engine } from "@idempo/core";
import { InvalidOptionError } from "@idempo/core";
import type { OptionKind } from "@idempo/core/internal";
import {
  BOOLEAN,
  checkOptions,
  describeValue,
  FUNCTION,
  INTEGER,
  optionKind,
  optionShape,
} from "@idempo/core/internal";
import { replayHeaderSet } from "../response/envelope.js";

/**
 * Resolves the tenant a request's key belongs to, from what authentication
 * established (a session, a verified token, an API key's account); never
 * from a header the client chooses freely. Return `undefined` or `''` when
 * there is none: the request is then refused with 400 `invalid_key`, and
 * nothing is stored under a shared or default tenant.
 */
export type TenantResolver<Req> = (request: Req) => string | undefined | Promise<string | undefined>;

/** Settings shared by the middleware (wrapped handlers) and by workflow routes. */
export interface CommonOptions<Req> {
  /** The tenant of the request; required. See {@link TenantResolver}. */
  tenant: TenantResolver<Req>;
  /**
   * Largest request body, in bytes, of a request that carries a key: a
   * larger one is refused with 413 `request_too_large` before anything is
   * claimed or run (by its Content-Length when it has one, else while it is
   * read). The same default on every framework and in both modes
   * (Default: 4 194 304, 4 MiB). On Fastify the
   * plugin sets it as the `bodyLimit` of the routes it covers and of
   * workflow routes registered after it; a route's own `bodyLimit` wins.
   * A body parser mounted before the middleware on Express applies its own
   * limit first.
   */
  maxRequestBytes?: number;
}

/** Options of the middleware that wraps existing route handlers. */
export interface IdempotencyOptions<Req> extends CommonOptions<Req> {
  /**
   * Refuse requests without an `Idempotency-Key` header with 400
   * `key_missing` (Default: false: such requests pass through untouched,
   * and nothing is stored).
   */
  required?: boolean;
  /** Methods the middleware applies to; others pass through untouched (Default: `['POST', 'PATCH']`). */
  methods?: readonly string[];
  /**
   * Response headers stored and replayed besides `content-type`,
   * `location`, `content-disposition` and `vary` (`content-encoding` is
   * always kept with the body; a replay decodes the body for a request
   * whose `Accept-Encoding` refuses it). Case-insensitive. `set-cookie` is
   * never replayed and is refused here (Default: none).
   */
  replayHeaders?: readonly string[];
  /**
   * Largest response body, in bytes, that is buffered and stored (Default:
   * 1 048 576, 1 MiB). Raise it to store larger bodies. A body above it
   * still completes the key: the stored answer is then a 500 problem
   * `response_too_large` naming the handler's status, so a retry never runs
   * the handler again.
   */
  maxResponseBytes?: number;
  /**
   * Whether a response of this status is stored (Default: every status is,
   * as with Stripe, 5xx included). Return false for answers your handler
   * gives before changing anything (a 400 from validation, a 429): the
   * claim is then released and the client may retry the same key at once.
   */
  storeResponse?: (status: number) => boolean;
  /** Lease of a wrapped run in ms (Default: the engine's `leaseMs`). */
  leaseMs?: number;
  /** How long a stored response is kept, in ms (Default: the engine's `retentionMs`, 24 h). */
  retentionMs?: number;
  /**
   * The longest a wrapped handler may hold its key, in ms, 1-2 147 483 647
   * (Default: 60 000, one minute). A handler that has not answered by then
   * gives the key up: its lease stops renewing, and the next retry takes
   * over at once instead of getting 409 forever. Set it per route by
   * mounting the middleware with its own options.
   */
  attemptTimeoutMs?: number;
}

/** Options of a route that runs a workflow. */
export interface IdempotentOptions<Req, In> extends CommonOptions<Req> {
  /** Builds the workflow's input from the request (body, path parameters); checked by the workflow's schema. */
  input: (request: Req) => In | Promise<In>;
  /**
   * Refuse requests without an `Idempotency-Key` header with 400
   * `key_missing` (Default: true). With false, such a request still runs
   * through the engine under a fresh random key: it is recorded and can be
   * finished by `engine.resumeStale()`, but the client cannot retry it.
   */
  required?: boolean;
  /**
   * Extra response headers computed from the stored response, e.g. a
   * `Location` for a 201. Called for the first answer and for every replay
   * with the same stored body, so both carry the same headers (Default: none).
   */
  headers?: (response: { status: number; body: unknown }) => Record<string, string>;
  /**
   * The URL where the client can follow a run that has not finished: sent
   * as `Location` on the 202 a suspended run answers with (a `.sleep` or
   * `.waitFor`), and on the 409 `key_in_progress` of later retries, so a
   * client that lost the 202 still finds it. Gets the request and the
   * run's `{ tenantId, key }` (Default: no `Location`).
   */
  location?: (request: Req, run: { readonly tenantId: string; readonly key: string }) => string | Promise<string>;
  /**
   * When another attempt holds the key (a retry while the first request
   * runs, or a run suspended in a `.sleep` or `.waitFor`), wait up to this
   * many ms for its final response before answering 409, 0 to 2 147 483 647
   * (Default: 0, answer at once). Passed to `runOnce` as `waitInFlightMs`:
   * the request is held open, no pooled connection is.
   */
  waitInFlightMs?: number;
}

/** Defaults applied; internal. */
export interface WrapSettings {
  readonly required: boolean;
  readonly methods: ReadonlySet<string>;
  readonly replayHeaders: ReadonlySet<string>;
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  readonly storeResponse: (status: number) => boolean;
  readonly workflowOptions: { leaseMs?: number; retentionMs?: number; attemptTimeoutMs: number };
}

const MIB = 1024 * 1024;
/** A request that takes longer than a minute is almost always a handler that will never answer. */
const WRAPPED_ATTEMPT_TIMEOUT_MS = 60_000;
/** Node's timer limit in ms, the ceiling `@idempo/core` gives its timer options too: a longer setTimeout fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Default largest request body of an idempotent request, in bytes (4 MiB):
 * room for a 2 MiB JSON document, while a body of many megabytes is never
 * read into memory or stored whole as a run's input.
 */
const DEFAULT_MAX_REQUEST_BYTES = 4 * MIB;

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOptionError(name, `${name} must be a positive integer, got ${describeValue(value)}`);
  }
  return value;
}

const strings = (what: string): OptionKind =>
  optionKind(what, (v) => Array.isArray(v) && v.every((item) => typeof item === "string"));

const COMMON = {
  tenant: optionKind(
    "a function that returns the authenticated tenant of a request (never a client-chosen header)",
    (v) => typeof v === "function",
  ),
  maxRequestBytes: INTEGER,
};

/** The middleware's options (`idempotency()`). */
const IDEMPOTENCY_OPTIONS = optionShape(
  {
    ...COMMON,
    required: BOOLEAN,
    methods: strings("an array of method names such as ['POST', 'PATCH']"),
    replayHeaders: strings("an array of header names"),
    maxResponseBytes: INTEGER,
    storeResponse: FUNCTION,
    leaseMs: INTEGER,
    retentionMs: INTEGER,
    attemptTimeoutMs: INTEGER,
  },
  ["tenant"],
);

/** A workflow route's options (`idempotent()`). */
const IDEMPOTENT_OPTIONS = optionShape(
  {
    ...COMMON,
    input: optionKind("a function that builds the workflow's input from the request", (v) => typeof v === "function"),
    required: BOOLEAN,
    headers: FUNCTION,
    location: optionKind(
      "a function of the request and { tenantId, key } returning a URL",
      (v) => typeof v === "function",
    ),
    waitInFlightMs: INTEGER,
  },
  ["tenant", "input"],
);

/** What a Fastify route's `config.idempotency` object may set over the plugin's options. */
export const ROUTE_IDEMPOTENCY_OPTIONS = optionShape({
  required: BOOLEAN,
  replayHeaders: IDEMPOTENCY_OPTIONS.kinds.replayHeaders as OptionKind,
  maxRequestBytes: INTEGER,
  maxResponseBytes: INTEGER,
  storeResponse: FUNCTION,
  leaseMs: INTEGER,
  retentionMs: INTEGER,
});

/** @throws TypeError on a missing engine. */
function checkEngine(engine: Engine): void {
  if (typeof engine?.runOnce !== "function") throw new TypeError("pass the engine made by createEngine({ db })");
}

/**
 * Check a workflow route's options.
 *
 * @throws TypeError on a missing engine.
 * @throws InvalidOptionError on an unknown option, a missing `tenant` or `input`, or a value of the wrong type.
 */
export function checkIdempotentOptions<Req, In>(engine: Engine, options: IdempotentOptions<Req, In>): void {
  checkEngine(engine);
  checkOptions("idempotent", IDEMPOTENT_OPTIONS, options);
}

/** The request limit of either mode, with its default. */
export function maxRequestBytes(options: { maxRequestBytes?: number | undefined }): number {
  return positiveInt("maxRequestBytes", options.maxRequestBytes, DEFAULT_MAX_REQUEST_BYTES);
}

/**
 * The middleware's settings with defaults applied.
 *
 * @throws TypeError on a missing engine, or `replayHeaders` naming `set-cookie`.
 * @throws InvalidOptionError on an unknown option, a missing `tenant`, or a value of the wrong type or out of range.
 */
export function wrapSettings<Req>(engine: Engine, options: IdempotencyOptions<Req>): WrapSettings {
  checkEngine(engine);
  checkOptions("idempotency", IDEMPOTENCY_OPTIONS, options);
  const bound = positiveInt("attemptTimeoutMs", options.attemptTimeoutMs, WRAPPED_ATTEMPT_TIMEOUT_MS);
  if (bound > MAX_TIMER_MS) {
    throw new InvalidOptionError("attemptTimeoutMs", `attemptTimeoutMs must be at most ${MAX_TIMER_MS}, got ${bound}`);
  }
  const workflowOptions: { leaseMs?: number; retentionMs?: number; attemptTimeoutMs: number } = {
    attemptTimeoutMs: bound,
  };
  if (options.leaseMs !== undefined) workflowOptions.leaseMs = positiveInt("leaseMs", options.leaseMs, 0);
  if (options.retentionMs !== undefined) {
    workflowOptions.retentionMs = positiveInt("retentionMs", options.retentionMs, 0);
  }
  return Object.freeze({
    required: options.required === true,
    methods: new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase())),
    replayHeaders: replayHeaderSet(options.replayHeaders),
    maxRequestBytes: maxRequestBytes(options),
    maxResponseBytes: positiveInt("maxResponseBytes", options.maxResponseBytes, MIB),
    storeResponse: options.storeResponse ?? (() => true),
    workflowOptions,
  });
}
