import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { acquireServer } from "../../testkit/src/index.ts";

declare module "vitest" {
  export interface ProvidedContext {
    serverUrl: string;
    serverKind: string;
  }
}

/** One server for the run (DATABASE_URL first, as in every suite); each torture run makes its own database on it. */
export default async function setup(project: TestProject) {
  const server = await acquireServer();
  console.log(`[testkit] ${server.kind} server`);
  project.provide("serverUrl", server.url);
  project.provide("serverKind", server.kind);
  return () => server.stop();
}
