-- Webhook subscriptions and their deliveries live in a schema of their own (WEBHOOKS_SCHEMA,
-- default `webhooks`): `make replay` swaps the read model's schema and must never take customers'
-- subscriptions or their delivery log with it. The notifier migrates it; the API writes
-- subscriptions on the primary.

-- One endpoint of one API key. The signing secret must be recoverable to sign, so it is sealed
-- (AES-256-GCM under an operator key, packages/webhooks/src/secret-box.ts), never hashed.
CREATE TABLE webhook_subscriptions (
  id                    text PRIMARY KEY,                 -- 'wh_' + 26 base32 characters
  key_id                bigint NOT NULL,                  -- api_keys.id of the owner (keys schema)
  url                   text NOT NULL,
  description           text NOT NULL DEFAULT '',
  filters               jsonb NOT NULL,                   -- packages/webhooks/src/filters.ts
  batch_max             integer NOT NULL DEFAULT 1 CHECK (batch_max BETWEEN 1 AND 100),
  batch_window_ms       integer NOT NULL DEFAULT 0 CHECK (batch_window_ms BETWEEN 0 AND 60000),
  secret_sealed         text NOT NULL,
  -- The secret before the last rotation, still signed with until previous_secret_until.
  previous_secret_sealed text,
  previous_secret_until timestamptz,
  status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  disabled_reason       text,
  disabled_at           timestamptz,
  -- The first failed attempt since the last success: 24 h of failures disable the subscription.
  failing_since         timestamptz,
  -- A receiver's 429 or 503 with Retry-After pauses the whole subscription, not only that message.
  paused_until          timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_key ON webhook_subscriptions (key_id);

-- One delivery (a Standard Webhooks message): one change, a batch of changes, or a test. Its id is
-- the webhook-id header, derived from the subscription and the change(s), so a change Kafka hands
-- over twice makes no second message. `body` is the exact JSON that is signed and sent.
CREATE TABLE webhook_messages (
  id               text PRIMARY KEY,
  subscription_id  text NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
  type             text NOT NULL CHECK (type IN ('price.changed', 'price.changed.batch', 'webhook.test')),
  body             text NOT NULL,
  event_count      integer NOT NULL CHECK (event_count > 0),
  -- pending: waiting for next_attempt_at; delivering: claimed until lease_until (a notifier that
  -- dies mid-delivery loses its lease and another attempt is made); succeeded; failed: retries
  -- exhausted or a non-retryable answer.
  status           text NOT NULL CHECK (status IN ('pending', 'delivering', 'succeeded', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  -- The retries' horizon (24 h) counts from here; a customer's retry of a failed message clears it.
  first_attempt_at timestamptz,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  -- When the (first) change was committed to the read model: latency is measured from here.
  committed_at     timestamptz NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  last_attempt_at  timestamptz,
  last_status_code integer,
  last_error       text,
  delivered_at     timestamptz,
  latency_ms       integer
);
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_messages_leased ON webhook_messages (lease_until) WHERE status = 'delivering';
CREATE INDEX webhook_messages_log ON webhook_messages (subscription_id, created_at DESC, id DESC);
-- The dispatcher claims per subscription (so one backlog cannot starve the others): 165 ms a claim
-- round over 1M messages with one subscription 100,000 behind, 0.6 ms with these. The id is in
-- the key because the claim orders by (next_attempt_at, id) and a batch's messages share one
-- next_attempt_at: without it each round sorted a subscription's whole backlog (1.8 ms against
-- 0.05 ms per subscription, 2,500 waiting).
CREATE INDEX webhook_messages_sub_due ON webhook_messages (subscription_id, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_messages_sub_leased ON webhook_messages (subscription_id, lease_until) WHERE status = 'delivering';
-- Retention deletes finished messages by age.
CREATE INDEX webhook_messages_finished ON webhook_messages (created_at) WHERE status IN ('succeeded', 'failed');

-- Changes matched by a batching subscription (batch_max > 1), waiting to be sealed into one
-- message: at batch_max of them, or batch_window_ms after the oldest.
CREATE TABLE webhook_batch_events (
  subscription_id text NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
  event_id        text NOT NULL,                          -- eventId(change): stable per change
  change          jsonb NOT NULL,                         -- the change as the body carries it
  committed_at    timestamptz NOT NULL,
  message_id      text,                                   -- set when sealed
  PRIMARY KEY (subscription_id, event_id)
);
CREATE INDEX webhook_batch_events_open ON webhook_batch_events (subscription_id, committed_at) WHERE message_id IS NULL;

-- Messages made per API key and UTC day, against the plan's daily delivery limit; past it, the
-- matches are only counted (dropped), never stored: one key's excess must not fill the log.
CREATE TABLE webhook_daily_usage (
  key_id   bigint NOT NULL,
  day      date NOT NULL,
  messages integer NOT NULL DEFAULT 0,
  dropped  integer NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, day)
);

-- The notifier's consumer offsets, written in the transaction that stores what the records
-- matched (the materializer's rule: offsets advance only with the state they produced).
CREATE TABLE webhook_consumer_offsets (
  group_id    text NOT NULL,
  topic       text NOT NULL,
  partition   integer NOT NULL,
  next_offset bigint NOT NULL,
  cluster_id  text NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, topic, partition)
);
