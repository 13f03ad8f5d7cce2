/**
 * A zod issue as an idempo `InputIssue`: its path printed (and shortened)
 * like every other path, and a note where the JSON round trip explains the
 * refusal. The schema sees the input as JSON, never the caller's objects,
 * so a `Date` reaches `z.date()` as its ISO string.
 */
import type { InputIssue } from "../errors.js";
import { formatPath, pathSegment } from "./json-path.js";

/** What idempo reads of a zod issue (zod 4's `$ZodIssue`, structurally). */
export interface SchemaIssue {
  readonly code?: string;
  readonly expected?: unknown;
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function valueAt(json: unknown, path: readonly PropertyKey[]): unknown {
  let v = json;
  for (const key of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

/** The issue with its path as `$.a[0].b` and, for a Date that became a string, what to do. */
export function schemaIssue(issue: SchemaIssue, json: unknown): InputIssue {
  const path = formatPath(issue.path.map((key) => pathSegment(key as string | number)));
  const at = issue.code === "invalid_type" && issue.expected === "date" ? valueAt(json, issue.path) : undefined;
  if (typeof at === "string" && ISO_DATE.test(at)) {
    return {
      path,
      message:
        `${issue.message}: the engine passes the input as JSON, where a Date is its ISO string; ` +
        "use z.coerce.date() to get a Date back (or z.iso.datetime() to keep the string)",
    };
  }
  return { path, message: issue.message };
}
