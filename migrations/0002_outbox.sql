-- Why: side effects that cannot take an idempotency key (email, SMS, webhooks)
-- are written here in the same transaction as the phase that decides them, and
-- delivered at least once by a relay. tenant_id leads every key and index.

CREATE TABLE outbox (
  tenant_id     text        NOT NULL,
  message_id    text        NOT NULL,
  key           text        NOT NULL,
  run_id        text        NOT NULL,
  topic         text        NOT NULL,
  payload       json        NOT NULL,
  -- Stable per message: the relay passes it to the handler on every delivery
  -- attempt so the receiver can deduplicate.
  delivery_key  text        NOT NULL,
  status        text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
  -- Delivery attempts so far; also the fencing token of the relay holding the row.
  attempts      integer     NOT NULL DEFAULT 0,
  available_at  timestamptz NOT NULL DEFAULT now(),
  -- A relay's claim on the row while it delivers (DB clock).
  locked_until  timestamptz,
  last_error    text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  delivered_at  timestamptz,
  PRIMARY KEY (tenant_id, message_id),
  UNIQUE (tenant_id, delivery_key)
);

-- Due messages, in order; only pending rows are indexed.
CREATE INDEX outbox_due ON outbox (tenant_id, available_at) WHERE status = 'pending';
