import { PGlite } from "@electric-sql/pglite";
import type { NotificationSource } from "@idempo/core";
import { fromDrizzle } from "@idempo/core";
import { drizzle as onNodePostgres } from "drizzle-orm/node-postgres";
import { drizzle as onPglite } from "drizzle-orm/pglite";
import pg from "pg";
import { ORDERS_DDL, schema } from "./schema.js";

/** Open the example's database: Drizzle on a `pg.Pool` at `url`, else on an in-memory PGlite. */
export async function openDatabase(url: string | undefined) {
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    const listen = new pg.Client({ connectionString: url });
    await listen.connect();
    const db = onNodePostgres(pool, { schema });
    await pool.query(ORDERS_DDL);
    return {
      db,
      data: fromDrizzle(db),
      listen: listen as NotificationSource,
      label: "PostgreSQL",
      close: async () => {
        await listen.end();
        await pool.end();
      },
    };
  }
  const pglite = await PGlite.create();
  await pglite.exec(ORDERS_DDL);
  const db = onPglite(pglite, { schema });
  return { db, data: fromDrizzle(db), listen: pglite, label: "PGlite, in memory", close: () => pglite.close() };
}
