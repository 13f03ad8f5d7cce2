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
  "28000": "authentication rejected",
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
 * One line naming where and why a database operation failed. Connection
 * failures read "cannot connect to the database at HOST:PORT: CAUSE"; other
 * server errors keep the server's own message with its SQLSTATE.
 */
export function describeDatabaseError(error: unknown, where: string): string {
  const code = codeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  if (code && NETWORK_CAUSES[code]) return `cannot connect to the database at ${where}: ${NETWORK_CAUSES[code]}`;
  if (code && SERVER_CAUSES[code]) return `cannot connect to the database at ${where}: ${SERVER_CAUSES[code]}`;
  if (/timeout/i.test(message)) return `cannot connect to the database at ${where}: timed out`;
  if (/Connection terminated/i.test(message)) {
    return `lost the connection to the database at ${where}: ${message}`;
  }
  if (code && /^[0-9A-Z]{5}$/.test(code)) return `database error at ${where}: ${message} (SQLSTATE ${code})`;
  return `database error at ${where}: ${message}`;
}
