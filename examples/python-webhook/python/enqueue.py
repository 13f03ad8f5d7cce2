"""Create an invoice and start the run that collects its payment.

    DATABASE_URL=postgres://... python3 enqueue.py acme inv-1001 4200

Prints {"created": true} (false for a repeat of the same request), or the
refusal as {"error": code, "sqlstate": ..., "message": ...} and exits 1.
"""

from __future__ import annotations

import json
import os
import sys

from billing import IdempoError, connect, create_invoice


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: enqueue.py TENANT INVOICE_ID AMOUNT_CENTS", file=sys.stderr)
        return 2
    tenant_id, invoice_id, amount = argv[1], argv[2], int(argv[3])
    with connect(os.environ["DATABASE_URL"]) as conn:
        try:
            created = create_invoice(conn, tenant_id, invoice_id, amount)
        except IdempoError as refusal:
            print(json.dumps({"error": refusal.code, "sqlstate": refusal.sqlstate, "message": refusal.text}))
            return 1
    print(json.dumps({"created": created}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
