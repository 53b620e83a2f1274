-- The liquidity score the price lists show, apart from the inputs it is computed from (issue 12,
-- freshness). item_liquidity is rewritten whenever any input moves: the item's listing count on
-- any marketplace, its best CNY bid or lowest ask, its sales in the last 7 days (which move with
-- the clock). Every such write gave the row a new xmin, and api_listings_v1's liquidity_xid then
-- named the item "changed" in all six price lists, even when the score shown did not move: in the
-- platform benchmark about every item's liquidity row changed within minutes, so each patch of a
-- list read most of the list. This table is written only when the score itself changes; the view
-- joins it instead, so liquidity_xid names changes a customer can see (what 0011 says of
-- item_liquidity's row versions now holds for this table's).
--
-- Same membership as item_liquidity (an item with listings, the score NULL when it cannot be
-- judged): a row is never deleted while its item is listed, so a score that becomes NULL is an
-- update with a new xmin, which the API's patches read, not a vanished join partner they cannot.
CREATE TABLE item_liquidity_score (
  market_hash_name text NOT NULL,
  phase            text NOT NULL,
  score            numeric(5, 2),
  as_of            timestamptz NOT NULL,
  PRIMARY KEY (market_hash_name, phase)
);
COMMENT ON TABLE item_liquidity_score IS
  'The shown liquidity score per item, written by refreshLiquidity only when it changes (item_liquidity holds its inputs)';
COMMENT ON COLUMN item_liquidity_score.as_of IS
  'When the score last changed (the read model''s clock of that refresh)';

INSERT INTO item_liquidity_score (market_hash_name, phase, score, as_of)
SELECT market_hash_name, phase, score, as_of FROM item_liquidity;

-- Columns, names and types as in 0012: still version 1 of the contract.
CREATE OR REPLACE VIEW api_listings_v1 AS
SELECT c.market, c.market_hash_name, c.phase, item_id(c.market_hash_name, c.phase) AS id, c.price, c.count,
       c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
       c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
       l.score AS liquidity, c.is_outlier, c.confidence,
       xid8_of(c.xmin) AS row_xid, xid8_of(l.xmin) AS liquidity_xid,
       age(c.xmin) AS row_age, age(l.xmin) AS liquidity_age
FROM listings_current c
LEFT JOIN item_liquidity_score l USING (market_hash_name, phase);
