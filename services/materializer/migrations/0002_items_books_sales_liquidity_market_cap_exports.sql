-- The rest of the read model: the item catalogue, derived values of current listings, buy
-- orders, float-ranged buckets, float buy orders, the store's book, sales, imported history,
-- liquidity and the market-cap index. Every table is a function of the topics alone (no wall
-- clock), so `make replay` rebuilds it byte for byte.

-- ---- item catalogue ----------------------------------------------------------------------
-- Where each item (name + phase) has been seen listed. The internal catalogue is the set of items
-- listed on at least two marketplaces: cross-listing confirms an item exists and is not a one-site
-- artefact (mis-named, test or fake listings), which is what the market cap must exclude.
CREATE TABLE item_markets (
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  market           text NOT NULL,
  first_seen_at    timestamptz NOT NULL,
  PRIMARY KEY (market_hash_name, phase, market)
);

-- Stable integer id per item: derived from the identity (not a sequence), so a replay gives the
-- same ids and clients can keep them.
CREATE FUNCTION item_id(name text, phase text) RETURNS bigint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ('x' || substr(md5(name || chr(31) || phase), 1, 12))::bit(48)::bigint $$;

CREATE VIEW catalogue AS
  SELECT market_hash_name, phase, item_id(market_hash_name, phase) AS id,
         count(*)::int AS markets, min(first_seen_at) AS first_seen_at
  FROM item_markets
  GROUP BY market_hash_name, phase
  HAVING count(*) >= 2;

-- ---- derived values of current listings (design.md "Materialisation rules") ---------------
-- stats_day D is the UTC day the row's statistics refer to; they only read closes of days < D:
--   base_Nd = close of day D - N,  avg_Nd = mean of the closes of days D-N .. D-1,
--   change_Nd = (price - base_Nd) / base_Nd x 100 (2 decimals, half away from zero).
-- NULL when there is no baseline (or no current price, for changes).
ALTER TABLE listings_current
  ADD COLUMN stats_day  date,
  ADD COLUMN base_1d    numeric(20, 2),
  ADD COLUMN base_7d    numeric(20, 2),
  ADD COLUMN base_30d   numeric(20, 2),
  ADD COLUMN base_90d   numeric(20, 2),
  ADD COLUMN avg_7d     numeric(20, 2),
  ADD COLUMN avg_30d    numeric(20, 2),
  ADD COLUMN avg_90d    numeric(20, 2),
  ADD COLUMN change_24h numeric(20, 2),
  ADD COLUMN change_7d  numeric(20, 2),
  ADD COLUMN change_30d numeric(20, 2),
  ADD COLUMN change_90d numeric(20, 2);
CREATE INDEX listings_current_stats ON listings_current (market, stats_day);

-- The percent change of `price` against `base` (NULL without either). The dividend gets 20
-- decimals so that PostgreSQL's quotient is exact far beyond the 2 we round to.
CREATE FUNCTION pct_change(price numeric, base numeric) RETURNS numeric
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT round(((price - base) * 100)::numeric(48, 20) / base, 2) $$;

-- Imported history (the history-only marketplace) has no count for some days.
ALTER TABLE listing_daily ALTER COLUMN count DROP NOT NULL;

-- ---- buy orders (CN-A, CN-B) ---------------------------------------------------------------
CREATE TABLE buyorders_current (
  market           text    NOT NULL,
  market_hash_name text    NOT NULL,
  phase            text    NOT NULL DEFAULT '',
  tier             text    NOT NULL DEFAULT '',
  currency         text    NOT NULL,
  price            numeric(20, 2) CHECK (price > 0),
  blue_price       numeric(20, 2) CHECK (blue_price > 0),
  count            integer NOT NULL CHECK (count >= 0),
  template_id      bigint,
  type_id          bigint,
  observed_at      timestamptz NOT NULL,
  cycle_id         text    NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase, tier)
);

-- ---- float-ranged buckets: a snapshot per cycle ---------------------------------------------
CREATE TABLE float_ranged_current (
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  float_min        numeric NOT NULL,
  float_max        numeric NOT NULL,
  currency         text NOT NULL,
  first_price      numeric(20, 2) CHECK (first_price > 0),
  fifth_price      numeric(20, 2) CHECK (fifth_price > 0),
  count            integer NOT NULL CHECK (count >= 0),
  phase_labels     jsonb NOT NULL DEFAULT '{}',
  observed_at      timestamptz NOT NULL,
  cycle_id         text NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase, float_min)
);
CREATE INDEX float_ranged_by_name ON float_ranged_current (market_hash_name, phase);

-- ---- individual float buy orders: a snapshot per cycle --------------------------------------
CREATE TABLE float_buyorders_current (
  market           text NOT NULL,
  order_id         text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  currency         text NOT NULL,
  price            numeric(20, 2) NOT NULL CHECK (price > 0),
  quantity         integer NOT NULL CHECK (quantity > 0),
  float_min        numeric,
  float_max        numeric,
  condition        text,
  observed_at      timestamptz NOT NULL,
  cycle_id         text NOT NULL,
  PRIMARY KEY (market, order_id)
);
CREATE INDEX float_buyorders_by_name ON float_buyorders_current (market, market_hash_name, phase);

-- ---- the store's order book: a snapshot per cycle -------------------------------------------
CREATE TABLE order_book_current (
  market           text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  currency         text NOT NULL,
  asks             jsonb NOT NULL,
  bids             jsonb NOT NULL,
  observed_at      timestamptz NOT NULL,
  cycle_id         text NOT NULL,
  PRIMARY KEY (market, market_hash_name, phase)
);

-- ---- completed sales: immutable happenings, kept; the API searches the last 72 h ----------
CREATE TABLE sales (
  market           text NOT NULL,
  sale_id          text NOT NULL,
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  currency         text NOT NULL,
  price            numeric(20, 2) NOT NULL CHECK (price > 0),
  sold_at          timestamptz NOT NULL,
  float_value      numeric,
  paint_index      integer,
  paint_seed       integer,
  stickers         jsonb NOT NULL DEFAULT '[]',
  charms           jsonb NOT NULL DEFAULT '[]',
  observed_at      timestamptz NOT NULL,
  PRIMARY KEY (market, sale_id)
);
CREATE INDEX sales_by_name ON sales (market_hash_name, sold_at DESC);
CREATE INDEX sales_by_time ON sales (sold_at);

-- ---- liquidity (item level, across marketplaces) -------------------------------------------
-- score = 100 x mean of the available components, each in [0, 1]:
--   depth    = n / (n + 20),  n = active listings on every marketplace (required)
--   velocity = s / (s + 10),  s = completed sales in the 7 days before `as_of`
--              (available when the item sold at least once in the 30 days before)
--   spread   = min(1, best CNY bid / lowest CNY ask)  (available with a CNY bid and ask)
-- NULL when the item has no active listing, or neither sales nor a bid to judge it by.
CREATE TABLE item_liquidity (
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  listings         integer NOT NULL,
  sales_7d         integer,
  best_bid         numeric(20, 2),
  lowest_ask       numeric(20, 2),
  score            numeric(5, 2),
  as_of            timestamptz NOT NULL,
  PRIMARY KEY (market_hash_name, phase)
);

-- ---- market cap (CN-A) -----------------------------------------------------------------------
-- Hourly points: sum(price x count) over the cleaned CN-A catalogue (0 < price < 1,000,000,
-- count >= 2, item in the catalogue), from each item's last snapshot in the 6 hours up to the
-- end of the hour. Daily points: the day's last hourly point (cleaned), or for days without one
-- a fast fallback from the daily closes without the catalogue filter (cleaned = false).
CREATE TABLE market_cap_hourly (
  hour       timestamptz PRIMARY KEY,
  market_cap numeric(24, 2) NOT NULL,
  items      integer NOT NULL,
  cleaned    boolean NOT NULL DEFAULT true
);
CREATE TABLE market_cap_daily (
  day        date PRIMARY KEY,
  market_cap numeric(24, 2) NOT NULL,
  items      integer NOT NULL,
  cleaned    boolean NOT NULL
);

-- The materializer's notion of "now": the latest finished_at of an applied poll-cycle marker.
-- Time-windowed values (liquidity's 7 days, partition retention) are computed against it, never
-- against the wall clock, so a replay and an accelerated simulator give the same answers.
CREATE TABLE read_model_clock (
  id     boolean PRIMARY KEY DEFAULT true CHECK (id),
  now    timestamptz NOT NULL
);

-- Where each marketplace's data is complete up to: the start of its last complete cycle (a
-- sales cycle reads the window up to its start). The sales export ends there.
ALTER TABLE market_freshness ADD COLUMN last_complete_started_at timestamptz;

-- ---- the 24 h sales export cache -------------------------------------------------------------
CREATE TABLE sales_exports (
  window_end timestamptz PRIMARY KEY,
  window_start timestamptz NOT NULL,
  built_at   timestamptz NOT NULL DEFAULT now(),
  sales      integer NOT NULL,
  bytes      bytea NOT NULL
);
