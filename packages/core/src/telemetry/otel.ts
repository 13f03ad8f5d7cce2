/**
 * OpenTelemetry through `@opentelemetry/api` only, loaded when present: it
 * is an optional peer dependency. Without it every instrument below is
 * absent and the engine does no telemetry work at all; with it but without
 * an SDK registered, the API's own no-op tracer and meter answer.
 */
import { createRequire } from "node:module";
import type * as Api from "@opentelemetry/api";

/** The API module, or null when the application did not install it. */
export function loadOtel(): typeof Api | null {
  try {
    return createRequire(import.meta.url)("@opentelemetry/api") as typeof Api;
  } catch {
    return null;
  }
}
