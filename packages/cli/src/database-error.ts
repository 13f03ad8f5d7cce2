/** Driver errors in operator words: "cannot connect to the database at host:port: connection refused". */

const NETWORK_CAUSES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ECONNRESET: "connection reset",
};

const SERVER_CAUSES: Record<string, string> = {
  "28P01": "password authentication failed",
  "3D000": "database does not exist",
  "57P03": "the server is starting up or shutting down",
  "53300": "too many connections",
};

function codeOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") return code;
  // Node tries every address of a host name and reports them together.
  const inner = (error as { errors?: unknown[] }).errors;
  return Array.isArray(inner) ? inner.map(codeOf).find((c) => c !== undefined) : undefined;
}

/**
 * SQLSTATE 28000 (invalid authorization specification) covers more than a
 * refused login: a role that does not exist, a pg_hba.conf that has no
 * entry for this client. The server's message says which.
 */
function authorizationCause(message: string): string {
  const role = /role "(.*)" does not exist/.exec(message);
  if (role) return `role "${role[1]}" does not exist (create it, or connect as another user)`;
  if (/pg_hba\.conf/.test(message)) return `the server accepts no connection from this client: ${message}`;
  return `the server refused this login: ${message}`;
}

/**
 * One line naming where and why a database operation failed. Connection
 * failures read "cannot connect to the database at HOST:PORT: CAUSE"; other
 * server errors keep the server's own message with its SQLSTATE.
 *
 * @param phase `connect` while the first connection is being opened (a
 *   connection closed then never opened, it was not lost), `query` after
 *   (Default: `query`).
 */
export function describeDatabaseError(error: unknown, where: string, phase: "connect" | "query" = "query"): string {
  const code = codeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  // A server that drops the socket during the start-up exchange shows up as a reset or a
  // termination, depending on who wrote last: either way the connection never opened.
  const closedEarly =
    phase === "connect" && (code === "ECONNRESET" || /Connection terminated unexpectedly/i.test(message));
  if (closedEarly) {
    return `cannot connect to the database at ${where}: the server closed the connection before it was established (is a PostgreSQL server listening there, and does it accept this client?)`;
  }
  if (code && NETWORK_CAUSES[code]) return `cannot connect to the database at ${where}: ${NETWORK_CAUSES[code]}`;
  if (code === "28000") return `cannot connect to the database at ${where}: ${authorizationCause(message)}`;
  if (code && SERVER_CAUSES[code]) return `cannot connect to the database at ${where}: ${SERVER_CAUSES[code]}`;
  if (/timeout/i.test(message)) return `cannot connect to the database at ${where}: timed out`;
  if (/Connection terminated/i.test(message)) return `lost the connection to the database at ${where}: ${message}`;
  if (code && /^[0-9A-Z]{5}$/.test(code)) return `database error at ${where}: ${message} (SQLSTATE ${code})`;
  return `database error at ${where}: ${message}`;
}
