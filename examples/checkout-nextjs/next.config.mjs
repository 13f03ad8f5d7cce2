/** @type {import('next').NextConfig} */
const config = {
  // Loaded by Node at run time from node_modules, not bundled: the engine, its SQL and the pg driver.
  serverExternalPackages: ["@idempo/core", "@idempo/http", "kysely", "pg"],
};

export default config;
