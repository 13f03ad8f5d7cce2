// The Kysely types idempo's declarations name, in one file written by hand (a
// build copies it into dist as it is, because the comment below must stay).
// Kysely is an optional peer: an application that uses Drizzle or
// node-postgres installs none, and there the import below resolves to
// nothing; the comment keeps its declarations compiling under
// `skipLibCheck: false`, where the types below are then `any` (only Kysely
// workflows use them).

// @ts-ignore kysely is an optional peer dependency
import type { DatabaseConnection, Kysely, QueryResult, Transaction } from "kysely";

/** Kysely's `Kysely<DB>`. */
export type KyselyDatabase<DB> = Kysely<DB>;
/** Kysely's `Transaction<DB>`. */
export type KyselyTransaction<DB> = Transaction<DB>;
/** Kysely's `DatabaseConnection`. */
export type KyselyConnection = DatabaseConnection;
/** Kysely's `QueryResult<R>`. */
export type KyselyQueryResult<R> = QueryResult<R>;
/** The module itself, as the Kysely data layer loads it when it is first used. */
// @ts-ignore kysely is an optional peer dependency
export type KyselyModule = typeof import("kysely");
