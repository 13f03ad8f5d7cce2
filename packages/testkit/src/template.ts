/**
 * The global set-up every package's test run shares: find a server, create
 * one template database and migrate it once with the engine; each test file
 * then clones it (`inject("serverUrl")`, `inject("templateDb")`).
 */
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { createDatabase, dropDatabase, uniqueName } from "./databases.js";
import { acquireServer } from "./server.js";

declare module "vitest" {
  export interface ProvidedContext {
    serverUrl: string;
    templateDb: string;
    serverKind: string;
  }
}

/** The part of `createEngine` the set-up needs (passed in: the testkit does not depend on the engine). */
export type MigratingEngineFactory = (options: { db: Kysely<unknown> }) => { migrate(): Promise<unknown> };

/**
 * A vitest `globalSetup` function: template database named after `prefix`,
 * migrated by an engine from `createEngine`; dropped (and a server the run
 * started stopped) at the end.
 */
export function templateSetup(prefix: string, createEngine: MigratingEngineFactory) {
  return async (project: TestProject): Promise<() => Promise<void>> => {
    const server = await acquireServer();
    const templateDb = uniqueName(prefix);
    const url = await createDatabase(server.url, templateDb);
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
    });
    await createEngine({ db }).migrate();
    // No connection may stay open on a template, or it cannot be cloned.
    await db.destroy();
    console.log(`[testkit] ${server.kind} server, template database ${templateDb}`);
    project.provide("serverUrl", server.url);
    project.provide("templateDb", templateDb);
    project.provide("serverKind", server.kind);
    return async () => {
      await dropDatabase(server.url, templateDb);
      await server.stop();
    };
  };
}
