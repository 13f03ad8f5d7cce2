-- Why: the ground truth of a torture run lives in PostgreSQL, outside the
-- worker processes the driver kills. Orders and invoices carry the unique
-- constraints an application should have anyway; reservations and the
-- effects ledger have none, so a phase that commits twice shows up as a
-- count of 2 instead of being stopped by the database.

CREATE SCHEMA shop;

-- The checkout's order, one per cart (as in examples/checkout).
CREATE TABLE shop.orders (
  id            text    PRIMARY KEY,
  tenant_id     text    NOT NULL,
  cart_id       text    NOT NULL,
  amount_cents  integer NOT NULL CHECK (amount_cents > 0),
  status        text    NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'paid')),
  charge_id     text,
  UNIQUE (tenant_id, cart_id)
);

-- The fulfilment's stock reservation, one per order reference. No unique
-- constraint on purpose: only idempo keeps it single, and the suite counts.
CREATE TABLE shop.reservations (
  id         text    PRIMARY KEY,
  tenant_id  text    NOT NULL,
  order_ref  text    NOT NULL,
  items      integer NOT NULL CHECK (items > 0),
  status     text    NOT NULL DEFAULT 'reserved' CHECK (status IN ('reserved', 'allocated', 'settled'))
);
CREATE INDEX reservations_by_ref ON shop.reservations (tenant_id, order_ref);

-- The fulfilment's invoice, one per order reference.
CREATE TABLE shop.invoices (
  id           text    PRIMARY KEY,
  tenant_id    text    NOT NULL,
  order_ref    text    NOT NULL,
  charge_id    text    NOT NULL,
  shipment_id  text    NOT NULL,
  closed       boolean NOT NULL DEFAULT false,
  UNIQUE (tenant_id, order_ref)
);

-- One row per committed phase, deliberately without a unique constraint.
CREATE TABLE shop.effects (
  id         bigserial PRIMARY KEY,
  tenant_id  text      NOT NULL,
  key        text      NOT NULL,
  workflow   text      NOT NULL,
  phase      text      NOT NULL,
  attempt    integer   NOT NULL
);
CREATE INDEX effects_by_key ON shop.effects (tenant_id, key);

-- The fake provider (payments, carrier, partner API), Stripe-like: one
-- operation per idempotency key, the same key with other parameters refused.
CREATE SCHEMA provider;

CREATE TABLE provider.operations (
  idempotency_key  text        PRIMARY KEY,
  service          text        NOT NULL,
  tenant_id        text        NOT NULL,
  intent_key       text        NOT NULL,
  step             text        NOT NULL,
  params           text        NOT NULL,
  result_id        text        NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX operations_by_intent ON provider.operations (tenant_id, intent_key);

-- Every call that reached the provider, repeats included.
CREATE TABLE provider.calls (
  id               bigserial   PRIMARY KEY,
  idempotency_key  text        NOT NULL,
  step             text        NOT NULL,
  at               timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The receiver of outbox messages (mailer, webhook endpoint): every delivery
-- it got, redeliveries included.
CREATE SCHEMA mailbox;

CREATE TABLE mailbox.deliveries (
  id            bigserial   PRIMARY KEY,
  message_id    text        NOT NULL,
  delivery_key  text        NOT NULL,
  tenant_id     text        NOT NULL,
  intent_key    text        NOT NULL,
  topic         text        NOT NULL,
  attempt       integer     NOT NULL,
  at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX deliveries_by_message ON mailbox.deliveries (message_id);

-- The durable scenario's captures: the confirmation nonce each capture saw,
-- deliberately without a unique constraint (a signal merged twice, or a
-- capture that committed twice, is a count of 2).
CREATE TABLE shop.captures (
  id         bigserial PRIMARY KEY,
  tenant_id  text      NOT NULL,
  key        text      NOT NULL,
  nonce      text      NOT NULL
);
CREATE INDEX captures_by_key ON shop.captures (tenant_id, key);

-- The fan-out scenario's record of workflow code executing under a
-- concurrency limit: a row while a branch or step of an attempt runs (its
-- limit key as the engine names it, and the attempt), deleted when it
-- returns. The scenario's sampler counts, per limit key, the runs with a
-- row whose attempt still owns its run under a live lease: an independent
-- reading of "at most max at once" beside the engine's own slot table.
CREATE TABLE shop.executing (
  id         bigserial PRIMARY KEY,
  limit_key  text      NOT NULL,
  tenant_id  text      NOT NULL,
  key        text      NOT NULL,
  attempt    integer   NOT NULL
);
