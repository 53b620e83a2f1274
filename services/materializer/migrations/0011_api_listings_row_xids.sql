-- The API keeps each price list as a cached body and, when a commit touched the list's
-- marketplace, patches the rows changed since it last read them instead of re-reading (and
-- re-serialising, re-compressing) all 33k (issue 12). "Changed since" is "written by a transaction
-- that the previous read's snapshot did not see": PostgreSQL answers that exactly from the row
-- version's xmin and that snapshot (pg_visible_in_snapshot), whatever the order in which
-- concurrent transactions commit, with no column or trigger on the hot path. The view publishes
-- the xmin of the listing row and of the liquidity row it is joined with, as xid8.
--
-- Adding columns at the end is compatible (CREATE OR REPLACE VIEW allows nothing else), so this
-- stays version 1 of the contract.

-- A row's xmin is a 32-bit transaction id; pg_visible_in_snapshot takes the 64-bit form. The
-- epoch is the current one unless the id is above the current counter's low half (then it was
-- assigned before the counter wrapped). Ids below 3 are the permanent ones (a frozen row reads
-- as 2): visible to every snapshot as they are.
CREATE FUNCTION xid8_of(x xid) RETURNS xid8
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN x::text::bigint < 3 THEN x::text::xid8
    ELSE ((greatest((pg_snapshot_xmax(pg_current_snapshot())::text::bigint >> 32)
                    - (x::text::bigint > (pg_snapshot_xmax(pg_current_snapshot())::text::bigint & 4294967295))::int,
                    0) << 32) | x::text::bigint)::text::xid8
  END
$$;

CREATE OR REPLACE VIEW api_listings_v1 AS
SELECT c.market, c.market_hash_name, c.phase, item_id(c.market_hash_name, c.phase) AS id, c.price, c.count,
       c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
       c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
       l.score AS liquidity, c.is_outlier, c.confidence,
       xid8_of(c.xmin) AS row_xid, xid8_of(l.xmin) AS liquidity_xid
FROM listings_current c
LEFT JOIN item_liquidity l USING (market_hash_name, phase);

-- Liquidity is merged now (derived.ts refreshLiquidity): a row is written only when its values
-- change, so the view's liquidity_xid names real changes, not every refresh.
COMMENT ON COLUMN item_liquidity.as_of IS
  'When the values last changed (the read model''s clock of that refresh); the sales window is 7 days before the refresh that computed them';
