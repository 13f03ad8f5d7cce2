export type { AnyDb, ClonedDatabase } from "./cloned-database.js";
export { ORDERS_DDL, useClonedDatabase } from "./cloned-database.js";
export { createDatabase, dropDatabase, uniqueName, withDatabase } from "./databases.js";
export type { TestServer } from "./server.js";
export { acquireServer, canConnect } from "./server.js";
export type { MigratingEngineFactory } from "./template.js";
export { templateSetup } from "./template.js";
