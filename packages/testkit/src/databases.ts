/**
 * One template database per test run, migrated once; one clone per test
 * file (CREATE DATABASE ... TEMPLATE), so files run in parallel in
 * isolation. A failed file's database is kept for inspection.
 */
import pg from "pg";

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

export async function createDatabase(serverUrl: string, name: string, template?: string): Promise<string> {
  await admin(serverUrl, async (c) => {
    // Concurrent clones of one template can collide briefly ("being accessed by other users").
    for (let tries = 0; ; tries++) {
      try {
        await c.query(`CREATE DATABASE ${ident(name)}${template ? ` TEMPLATE ${ident(template)}` : ""}`);
        return;
      } catch (error) {
        if (tries >= 20 || (error as { code?: string }).code !== "55006") throw error;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 200));
      }
    }
  });
  return withDatabase(serverUrl, name);
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  await admin(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`));
}

/** A short unique database name: prefix, process id, time and randomness. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 7)}`;
}
