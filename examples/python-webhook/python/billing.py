"""The billing service's side of idempo, through SQL (docs/sql-api.md).

An invoice and the run that collects its payment are created in one
transaction, and the payment provider's result is delivered as the run's
signal. A TypeScript worker (src/worker-main.ts) executes the runs. Needs
psycopg 3: Debian's python3-psycopg, or `pip install psycopg`.
"""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

WORKFLOW = "invoice_payment"
SIGNAL = "payment_result"

# The SQLSTATEs of idempo's SQL interface and the HTTP status of each
# (the engine's `httpStatus` for the code the message starts with).
HTTP_STATUS = {
    "IP001": 400,  # invalid_key
    "IP002": 400,  # invalid_input
    "IP003": 413,  # payload_too_large
    "IP004": 422,  # key_mismatch
    "IP005": 410,  # key_expired
    "IP006": 409,  # key_in_progress
    "IP007": 404,  # run_not_found
    "IP008": 409,  # run_state
    "IP009": 500,  # workflow_definition
    "IP010": 500,  # invalid_option
}


class IdempoError(Exception):
    """A refusal of idempo's SQL interface: its SQLSTATE, code, HTTP status and message."""

    def __init__(self, sqlstate: str, message: str) -> None:
        code, _, text = message.partition(": ")
        super().__init__(message)
        self.sqlstate = sqlstate
        self.code = code
        self.http_status = HTTP_STATUS[sqlstate]
        self.text = text


def _refusal(error: psycopg.Error) -> IdempoError | None:
    if error.sqlstate in HTTP_STATUS:
        return IdempoError(error.sqlstate, error.diag.message_primary or "")
    return None


def connect(url: str) -> psycopg.Connection:
    """A connection in autocommit mode: each call below opens its own transaction."""
    return psycopg.connect(url, autocommit=True)


def create_invoice(conn: psycopg.Connection, tenant_id: str, invoice_id: str, amount_cents: int) -> bool:
    """Insert the invoice and enqueue the run that collects it, in one transaction.

    Both exist once it commits, or neither. The invoice id is the run's
    idempotency key: a repeat of the same request changes nothing and
    answers False; the same id with another amount raises key_mismatch.
    """
    try:
        with conn.transaction():
            conn.execute(
                "INSERT INTO invoices (tenant_id, id, amount_cents) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant_id, invoice_id, amount_cents),
            )
            row = conn.execute(
                "SELECT idempo.enqueue(%s, %s, %s, %s)",
                (tenant_id, invoice_id, WORKFLOW, Jsonb({"invoiceId": invoice_id, "amountCents": amount_cents})),
            ).fetchone()
    except psycopg.Error as error:
        refusal = _refusal(error)
        if refusal is None:
            raise
        raise refusal from error
    return bool(row and row[0])


def deliver_payment_result(
    conn: psycopg.Connection, tenant_id: str, invoice_id: str, status: str, reference: str
) -> dict[str, bool]:
    """Deliver the provider's result to the invoice's run: {duplicate, woke, expired}.

    The same result delivered again is a duplicate and changes nothing, so a
    provider that repeats its webhook is answered 200 every time.
    """
    try:
        row = conn.execute(
            "SELECT duplicate, woke, expired FROM idempo.signal(%s, %s, %s, %s)",
            (tenant_id, invoice_id, SIGNAL, Jsonb({"status": status, "reference": reference})),
        ).fetchone()
    except psycopg.Error as error:
        refusal = _refusal(error)
        if refusal is None:
            raise
        raise refusal from error
    assert row is not None
    return {"duplicate": row[0], "woke": row[1], "expired": row[2]}
