-- The committed-change log: every change the outbox publishes to price-changes.v1, numbered in
-- commit order, kept for a retention window. The HTTP change feed (GET /v1/prices/changes) and
-- stream (GET /v1/prices/stream) read it; its `seq` is their cursor.
--
-- Gaps are impossible by construction: the publisher takes a transaction-scoped advisory lock
-- before it draws numbers and holds it until COMMIT, so a transaction with higher numbers cannot
-- commit before one with lower numbers. A reader that has seen seq n has seen everything below n
-- that it will ever see (numbers of a rolled-back transaction are skipped, never filled later).
CREATE SEQUENCE price_change_seq;

CREATE TABLE price_change_log (
  seq              bigint PRIMARY KEY,
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  currency         text NOT NULL,
  old_price        numeric(20, 2),
  new_price        numeric(20, 2),
  old_count        integer,
  new_count        integer,
  observed_at      timestamptz NOT NULL,
  changed_at       timestamptz NOT NULL,
  logged_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX price_change_log_by_market ON price_change_log (market, seq);

-- Everything at or below `pruned_through` has been deleted by retention: a cursor below it cannot
-- be continued without a gap, so the feed answers 410 instead of silently skipping. `epoch` names
-- this log: a read model rebuilt by `make replay` starts a new log whose numbers restart, and a
-- cursor of the old one must be refused, not read as a position in the new one.
CREATE TABLE price_change_log_state (
  id             boolean PRIMARY KEY DEFAULT true CHECK (id),
  pruned_through bigint NOT NULL DEFAULT 0,
  epoch          text NOT NULL DEFAULT left(replace(gen_random_uuid()::text, '-', ''), 12)
);
INSERT INTO price_change_log_state DEFAULT VALUES;
