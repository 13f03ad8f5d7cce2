/** Every migration file of the repository, by name, so that adding one does not break the tests that count them. */
import { readdirSync } from "node:fs";

export const MIGRATIONS = readdirSync(new URL("../../../../migrations", import.meta.url))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));
