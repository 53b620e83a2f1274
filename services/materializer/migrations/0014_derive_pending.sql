-- The derive path in two transactions (issue 12, freshness). Applying markers updates
-- listings_current rows (vanished items nulled, statistics rolled into the new day, the outlier
-- guard's second look), and those row locks were held until the same transaction had also
-- recomputed liquidity over the whole catalogue and the market cap of the cycles' hours: ~27 s a
-- transaction under the platform benchmark's load, during which every ingest batch that wrote one
-- of those rows waited (produce -> committed reached 72 s). Now the markers' transaction queues the
-- recomputation here and commits; a second transaction, which writes only item_liquidity,
-- item_liquidity_score and the market-cap tables (no table ingest writes), does it and deletes
-- what it did.
--
-- Rows are only inserted by the first and deleted by id by the second, never updated, so neither
-- waits on the other's row locks. (Both take the derive path's advisory lock first, so a markers'
-- transaction waits for, or skips its turn behind, a recomputation before it holds any row lock.)
CREATE TABLE derive_pending (
  id       bigserial PRIMARY KEY,
  -- Hours of market cap to recompute (a LISTINGS cycle's span); both NULL: liquidity only, which
  -- every queued row implies (it depends on the clock every marker moves).
  cap_from timestamptz,
  cap_to   timestamptz,
  CHECK ((cap_from IS NULL) = (cap_to IS NULL))
);
