import { describe, expect, it } from "vitest";
import { describeDatabaseError } from "./database-error.js";

const serverError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe("describeDatabaseError: the real cause, in operator words", () => {
  it("names a role that does not exist instead of 'authentication rejected'", () => {
    const text = describeDatabaseError(serverError("28000", 'role "ghost" does not exist'), "db:5432", "connect");
    expect(text).toBe(
      'cannot connect to the database at db:5432: role "ghost" does not exist (create it, or connect as another user)',
    );
  });

  it("says a pg_hba.conf refusal is one", () => {
    const error = serverError("28000", 'no pg_hba.conf entry for host "10.0.0.9", user "app", database "shop"');
    expect(describeDatabaseError(error, "db:5432")).toMatch(
      /accepts no connection from this client: no pg_hba\.conf entry/,
    );
  });

  it("a connection closed while it was being opened never opened: it was not lost", () => {
    for (const error of [
      new Error("Connection terminated unexpectedly"),
      serverError("ECONNRESET", "read ECONNRESET"),
    ]) {
      const text = describeDatabaseError(error, "db:5432", "connect");
      expect(text).toMatch(
        /^cannot connect to the database at db:5432: the server closed the connection before it was established/,
      );
    }
  });

  it("a connection closed later was lost", () => {
    const text = describeDatabaseError(new Error("Connection terminated unexpectedly"), "db:5432", "query");
    expect(text).toBe("lost the connection to the database at db:5432: Connection terminated unexpectedly");
  });
});
