-- The outlier guard: every listing value says whether it looks like a single manipulated or
-- mistyped listing (`is_outlier`) and how much to trust it (`confidence`, 0..1).
--
-- Method (one definition, listing_quality below, used by the ingest MERGE, the re-evaluation at
-- each listings marker, and the market-cap cleaning):
--   references: own = the median of the item's daily closes on the same marketplace over the 7
--               days before the stats day (at least 3 closes), peer = the median of the item's
--               current prices on the other marketplaces of the same currency (at least one).
--   is_outlier: the price is more than 5× away (below a fifth or above five times) from every
--               reference available; false without any reference (nothing to judge against).
--               A real market-wide move is not an outlier: the peers moved too.
--   confidence: 0.6 × agreement + 0.4 × depth, rounded to 2 decimals, where agreement is, for the
--               closest reference, 1 − |ln(price / reference)| / ln 5 (1: equal, 0: 5× away or
--               more; 0.5 without references) and depth = min(1, listing count / 5).
-- Medians are percentile_disc(0.5): an actual price (the lower middle one of an even count).
-- NULL price: both NULL.

ALTER TABLE listings_current
  ADD COLUMN median_7d  numeric(20, 2),
  ADD COLUMN is_outlier boolean,
  ADD COLUMN confidence numeric(3, 2) CHECK (confidence BETWEEN 0 AND 1);
COMMENT ON COLUMN listings_current.median_7d IS
  'median of the 7 daily closes before stats_day (>= 3 closes), the outlier guard''s own reference';

ALTER TABLE price_change_outbox
  ADD COLUMN is_outlier boolean,
  ADD COLUMN confidence numeric(3, 2);

CREATE FUNCTION listing_quality(price numeric, count integer, own numeric, peer numeric,
                                OUT is_outlier boolean, OUT confidence numeric)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT
    CASE WHEN price IS NULL THEN NULL
         WHEN own IS NULL AND peer IS NULL THEN false
         ELSE (own IS NULL OR price * 5 < own OR price > own * 5)
          AND (peer IS NULL OR price * 5 < peer OR price > peer * 5) END,
    CASE WHEN price IS NULL THEN NULL
         ELSE round(0.6 * CASE WHEN own IS NULL AND peer IS NULL THEN 0.5
                               ELSE greatest(1 - least(1, abs(ln(price / own)) / ln(5::numeric)),
                                             1 - least(1, abs(ln(price / peer)) / ln(5::numeric))) END
                    + 0.4 * least(1, greatest(count, 0) / 5.0), 2) END
$$;

-- The peer reference of one row: the median current price of the same item on the other
-- marketplaces of its currency (NULL: none lists it).
CREATE FUNCTION peer_median(p_name text, p_phase text, p_currency text, p_market text) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY price)
  FROM listings_current
  WHERE market_hash_name = p_name AND phase = p_phase AND currency = p_currency
    AND market <> p_market AND price IS NOT NULL
$$;
