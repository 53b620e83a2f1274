-- The liquidity scores on their own, for the API's list bodies (services/api/src/list-body.ts).
-- A list followed moved scores through api_listings_v1: every item whose score the derive path
-- wrote came back as its whole listing row with its statistics, once per list, and the patch
-- carrying them held the list's next price change behind it (issue 12's freshness: committed →
-- visible p99 5–22 s). The score alone, read once per list at most every DERIVED_MAX_LAG_MS, is
-- the name, the phase and a number; the xid and age columns are those of api_listings_v1 (0011,
-- 0012) for the same "written since a snapshot" test.
--
-- A new view, not a changed one: still version 1 of the contract.
CREATE VIEW api_liquidity_v1 AS
SELECT market_hash_name, phase, score AS liquidity, xid8_of(xmin) AS liquidity_xid, age(xmin) AS liquidity_age
FROM item_liquidity_score;
