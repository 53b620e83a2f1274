-- "Rows changed since a snapshot" (0011) evaluated the exact visibility test on every row of the
-- marketplace, joined with every liquidity row: ~90 ms of PostgreSQL a patch on an idle machine at
-- 35,000 rows (each row's xid8_of calls pg_current_snapshot() twice), and the API patches each
-- list up to once a second (issue 12's freshness: PostgreSQL used 94 CPU-s in one benchmark's
-- freshness phase). The age of the writing transaction (age(xmin): transactions since, on the
-- clock of the reading transaction, cheap and comparable with the age of the snapshot's xmin) lets
-- the reader keep only the rows written at or after the earlier snapshot's oldest transaction,
-- each side of the join apart, before the exact test. A frozen row's age is the largest integer.
--
-- Added at the end, as 0011 did: still version 1 of the contract.
CREATE OR REPLACE VIEW api_listings_v1 AS
SELECT c.market, c.market_hash_name, c.phase, item_id(c.market_hash_name, c.phase) AS id, c.price, c.count,
       c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
       c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
       l.score AS liquidity, c.is_outlier, c.confidence,
       xid8_of(c.xmin) AS row_xid, xid8_of(l.xmin) AS liquidity_xid,
       age(c.xmin) AS row_age, age(l.xmin) AS liquidity_age
FROM listings_current c
LEFT JOIN item_liquidity l USING (market_hash_name, phase);
