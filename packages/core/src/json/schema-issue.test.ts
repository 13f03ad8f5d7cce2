import { describe, expect, it } from "vitest";
import { z } from "zod";
import { schemaIssue } from "./schema-issue.js";

const issuesOf = (schema: z.ZodType, json: unknown) => {
  const parsed = schema.safeParse(json);
  if (parsed.success) throw new Error("expected the schema to refuse");
  return parsed.error.issues.map((issue) => schemaIssue(issue, json));
};

describe("schemaIssue: zod issues as idempo prints them", () => {
  it("explains a Date that arrived as its ISO string, and points to z.coerce.date()", () => {
    const json = JSON.parse(JSON.stringify({ at: new Date(0) }));
    const [issue] = issuesOf(z.object({ at: z.date() }), json);
    expect(issue?.path).toBe("$.at");
    expect(issue?.message).toMatch(/expected date, received string/);
    expect(issue?.message).toMatch(/passes the input as JSON.*ISO string/);
    expect(issue?.message).toMatch(/z\.coerce\.date\(\)/);
  });

  it("says nothing about dates when the string is no date at all", () => {
    const [issue] = issuesOf(z.object({ at: z.date() }), { at: "soon" });
    expect(issue?.message).not.toMatch(/coerce/);
  });

  it("keeps other issues as zod wrote them", () => {
    const [issue] = issuesOf(z.object({ n: z.number() }), { n: "1" });
    expect(issue).toEqual({ path: "$.n", message: "Invalid input: expected number, received string" });
  });

  it("shortens the path of an issue deep inside the input", () => {
    type Deep = number | Deep[];
    const deep: z.ZodType<Deep> = z.lazy(() => z.union([z.number(), z.array(deep)]));
    let json: unknown = "x";
    for (let i = 0; i < 100; i++) json = [json];
    const issues = issuesOf(deep, json);
    for (const issue of issues) expect(issue.path.length).toBeLessThan(60);
  });
});
