-- The read contract, version 1: the views the API reads, and nothing else. The materializer owns
-- every table behind them and may reshape those freely as long as these views keep their columns
-- and types; packages/store/src/read-contract.ts describes them, the API's queries are typed by
-- that description, and test/integration/read-contract.test.ts checks the description against
-- these views. A change that breaks them is a new version (api_*_v2) beside this one.

-- Current listings with the item's liquidity score (rows without a price included: the store
-- joins them to its order books; the price lists filter them out).
CREATE VIEW api_listings_v1 AS
SELECT c.market, c.market_hash_name, c.phase, item_id(c.market_hash_name, c.phase) AS id, c.price, c.count,
       c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
       c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
       l.score AS liquidity, c.is_outlier, c.confidence
FROM listings_current c
LEFT JOIN item_liquidity l USING (market_hash_name, phase);

CREATE VIEW api_buyorders_v1 AS
SELECT market, market_hash_name, phase, tier, item_id(market_hash_name, phase || chr(31) || tier) AS id,
       price, blue_price, count, template_id, type_id, observed_at
FROM buyorders_current;

CREATE VIEW api_order_books_v1 AS
SELECT market, market_hash_name, phase, asks, bids, observed_at FROM order_book_current;

-- Days as 'YYYY-MM-DD' text: a date has no time zone, and a driver must not invent one.
CREATE VIEW api_daily_v1 AS
SELECT market, market_hash_name, phase, day::text AS day, close, count, open, high, low FROM listing_daily;

CREATE VIEW api_hourly_v1 AS
SELECT market, market_hash_name, phase, hour, price, count, open, high, low FROM listing_hourly;

-- Every (item, marketplace) ever priced: whether a name was ever seen.
CREATE VIEW api_item_markets_v1 AS
SELECT market, market_hash_name, phase, first_seen_at FROM item_markets;

CREATE VIEW api_float_ranged_v1 AS
SELECT market, market_hash_name, phase, float_min, float_max, first_price, fifth_price, count, phase_labels, observed_at
FROM float_ranged_current;

CREATE VIEW api_float_buyorders_v1 AS
SELECT market, order_id, market_hash_name, phase, price, quantity, float_min, float_max, condition, observed_at
FROM float_buyorders_current;

-- Charms are "keychains" to users (the spec and the export name them so).
CREATE VIEW api_sales_v1 AS
SELECT market, sale_id, market_hash_name, phase, currency, price, sold_at, float_value, paint_index, paint_seed,
       stickers, charms AS keychains
FROM sales;

CREATE VIEW api_market_cap_daily_v1 AS
SELECT day::text AS day, market_cap, items, cleaned FROM market_cap_daily;

CREATE VIEW api_market_cap_hourly_v1 AS
SELECT hour, market_cap, items, cleaned FROM market_cap_hourly;

CREATE VIEW api_clock_v1 AS
SELECT now FROM read_model_clock;

CREATE VIEW api_freshness_v1 AS
SELECT market, kind, last_outcome, last_finished_at, last_complete_at, last_complete_started_at, consecutive_failed,
       last_applied_at, last_complete_applied_at
FROM market_freshness;

CREATE VIEW api_materializers_v1 AS
SELECT member_id, group_id, host, pid, state, started_at, heartbeat_at, last_batch_at, lag FROM materializer_heartbeat;

CREATE VIEW api_dead_letters_v1 AS
SELECT topic, reason, received_at FROM dead_letters;

CREATE VIEW api_price_changes_v1 AS
SELECT seq, market, market_hash_name, phase, currency, old_price, new_price, old_count, new_count, observed_at,
       changed_at
FROM price_change_log;

CREATE VIEW api_price_change_log_v1 AS
SELECT epoch, pruned_through FROM price_change_log_state;

CREATE VIEW api_sales_exports_v1 AS
SELECT window_start, window_end, sales, bytes, built_at FROM sales_exports;
