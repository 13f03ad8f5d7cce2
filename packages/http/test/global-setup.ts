import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { acquireServer, createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";

declare module "vitest" {
  export interface ProvidedContext {
    serverUrl: string;
    templateDb: string;
  }
}

/** Migrate one template database for the whole run; each test file clones it. */
export default async function setup(project: TestProject) {
  const server = await acquireServer();
  const template = uniqueName("idempo_http_tpl");
  const url = await createDatabase(server.url, template);
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
  });
  await createEngine({ db }).migrate();
  await db.destroy();
  console.log(`[testkit] ${server.kind} server, template database ${template}`);
  project.provide("serverUrl", server.url);
  project.provide("templateDb", template);
  return async () => {
    await dropDatabase(server.url, template);
    await server.stop();
  };
}
