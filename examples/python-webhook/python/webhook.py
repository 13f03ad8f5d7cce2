"""The payment provider's webhook: each event becomes the invoice run's signal.

    DATABASE_URL=postgres://... python3 webhook.py --port 8080

POST /webhooks/payments with {"tenant", "invoice", "status", "reference"}
answers 200 {"duplicate", "woke", "expired"}, also when the provider
repeats an event it is unsure arrived; a refusal answers its HTTP status
with a problem body (RFC 9457) whose code is idempo's. It prints
`listening on http://127.0.0.1:<port>` once it accepts requests.
"""

from __future__ import annotations

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from billing import IdempoError, connect, deliver_payment_result

DATABASE_URL = os.environ.get("DATABASE_URL", "")


class PaymentWebhook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        if self.path != "/webhooks/payments":
            self._answer(404, {"type": "about:blank", "title": "Not Found", "status": 404})
            return
        try:
            event = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            fields = [event[name] for name in ("tenant", "invoice", "status", "reference")]
            if not all(isinstance(value, str) for value in fields):
                raise ValueError("every field is a string")
        except (ValueError, KeyError, TypeError) as error:
            self._answer(400, {"type": "about:blank", "title": "Bad Request", "status": 400, "detail": str(error)})
            return
        tenant_id, invoice_id, status, reference = fields
        try:
            with connect(DATABASE_URL) as conn:
                answer = deliver_payment_result(conn, tenant_id, invoice_id, status, reference)
        except IdempoError as refusal:
            problem = {
                "type": "about:blank",
                "title": refusal.code,
                "status": refusal.http_status,
                "code": refusal.code,
                "detail": refusal.text,
            }
            self._answer(refusal.http_status, problem)
            return
        self._answer(200, answer)

    def _answer(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode("utf-8")
        content_type = "application/json" if status < 400 else "application/problem+json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), PaymentWebhook)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
