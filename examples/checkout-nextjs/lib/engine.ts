/**
 * One engine per server process, on the database at DATABASE_URL. The pool
 * connects at the first request, not when `next build` loads the route.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";

let engine: Engine | undefined;

export function engineOf(): Engine {
  if (engine === undefined) {
    const connectionString = process.env.DATABASE_URL;
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString }) }) });
    engine = createEngine({ db });
  }
  return engine;
}

/** The account of a request, as authentication would give it: here, a fixed API key per tenant. */
const API_KEYS: Readonly<Record<string, string>> = { sk_test_acme: "acme", sk_test_globex: "globex" };

export function accountOf(request: Request): string | undefined {
  const token = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1];
  return token === undefined ? undefined : API_KEYS[token];
}
