-- The read model's core: current listings, history, the change outbox, consumed offsets and
-- poll-cycle markers. Prices are numeric (exact); a missing price is NULL, never 0.

-- Consumed Kafka offsets, written in the same transaction as the rows they produced: after a
-- crash the materializer resumes exactly after the last committed batch.
CREATE TABLE consumer_offsets (
  group_id    text    NOT NULL,
  topic       text    NOT NULL,
  partition   integer NOT NULL,
  next_offset bigint  NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, topic, partition)
);

-- Latest state per marketplace and item. observed_at is the upstream's time of the observation;
-- an event only replaces a row it is newer than, so redelivery and replays change nothing.
CREATE TABLE listings_current (
  market           text    NOT NULL,
  market_hash_name text    NOT NULL,
  phase            text    NOT NULL DEFAULT '',
  currency         text    NOT NULL,
  price            numeric(20, 2) CHECK (price > 0),
  count            integer NOT NULL CHECK (count >= 0),
  exterior         text,
  stattrak         boolean NOT NULL DEFAULT false,
  souvenir         boolean NOT NULL DEFAULT false,
  template_id      bigint,
  item_page_url    text,
  observed_at      timestamptz NOT NULL,
  cycle_id         text    NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase)
);
CREATE INDEX listings_current_by_name ON listings_current (market_hash_name, phase);

-- Hourly snapshots: the last observation within each hour. Partitioned by UTC day so that
-- dropping ~100-day-old data is dropping partitions, not deleting rows.
CREATE TABLE listing_hourly (
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  hour             timestamptz NOT NULL,
  price            numeric(20, 2) CHECK (price > 0),
  count            integer NOT NULL,
  observed_at      timestamptz NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase, hour)
) PARTITION BY RANGE (hour);

-- Daily closes: the last observation of each UTC day with a price; kept forever.
CREATE TABLE listing_daily (
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  day              date NOT NULL,
  close            numeric(20, 2) NOT NULL CHECK (close > 0),
  count            integer NOT NULL,
  observed_at      timestamptz NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase, day)
);

-- Transactional outbox of committed price/count changes: written in the batch's transaction,
-- published to price-changes.v1 and prices.current.v1 afterwards, then deleted.
CREATE TABLE price_change_outbox (
  id               bigserial PRIMARY KEY,
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  currency         text NOT NULL,
  old_price        numeric(20, 2),
  new_price        numeric(20, 2),
  old_count        integer,
  new_count        integer,
  observed_at      timestamptz NOT NULL,
  changed_at       timestamptz NOT NULL DEFAULT now()
);

-- Poll-cycle markers. A marker is applied (vanished items nulled, freshness updated) once the
-- consumer has read its data topic up to end_offsets; until then it waits here.
CREATE TABLE poll_cycles (
  cycle_id       text PRIMARY KEY,
  market         text NOT NULL,
  kind           text NOT NULL,
  mode           text NOT NULL,
  outcome        text NOT NULL,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz NOT NULL,
  items_seen     integer NOT NULL,
  events_emitted integer NOT NULL,
  error          text,
  data_topic     text NOT NULL,
  end_offsets    jsonb NOT NULL,
  applied_at     timestamptz
);
CREATE INDEX poll_cycles_pending ON poll_cycles (data_topic) WHERE applied_at IS NULL;

-- Freshness per marketplace and data kind (what /v1/status will show).
CREATE TABLE market_freshness (
  market              text NOT NULL,
  kind                text NOT NULL,
  last_cycle_id       text NOT NULL,
  last_outcome        text NOT NULL,
  last_finished_at    timestamptz NOT NULL,
  last_complete_at    timestamptz,
  consecutive_failed  integer NOT NULL DEFAULT 0,
  PRIMARY KEY (market, kind)
);

-- Records that could not be decoded: kept with their position so nothing is lost silently,
-- and the partition moves on instead of stopping the whole read model.
CREATE TABLE dead_letters (
  topic       text    NOT NULL,
  partition   integer NOT NULL,
  "offset"    bigint  NOT NULL,
  key         text,
  error       text    NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (topic, partition, "offset")
);
