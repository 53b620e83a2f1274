-- Candles: open, high and low per history bucket beside the close that was already kept
-- (listing_hourly.price is the hour's close, listing_daily.close the day's; `count` stays the
-- close's listing count). Written by writeHistory (materializer/src/listings.ts) from every
-- priced observation of the bucket, merged across batches so that any batch split, order or
-- redelivery of the same events gives the same row.
--
-- open_at is when the open was observed: the merge keeps the open with the earlier open_at. Rows
-- that exist before this migration get open_at = '-infinity' ("written before candles were
-- recorded"): their open, high and low are unknown and stay NULL even when later events of the
-- same bucket arrive, instead of growing a candle out of part of the bucket's observations. A
-- replay (`make replay`) rebuilds them complete. The value comes from a constant default that is
-- dropped right after, so PostgreSQL stores it once in the catalogue (no table rewrite) and new
-- rows get NULL.
--
-- NULL open/high/low otherwise means the bucket has no priced observation: an hour whose
-- observations all had no listing, or a close of the history-only marketplace, which imports
-- closes only (materializer/src/books.ts): its open, high and low are never invented.
--
-- ALTER on listing_hourly's parent reaches every day partition and the ones created later.
-- The checks are NOT VALID: every existing row has NULL candles, so scanning them proves nothing.

ALTER TABLE listing_hourly
  ADD COLUMN open    numeric(20, 2),
  ADD COLUMN high    numeric(20, 2),
  ADD COLUMN low     numeric(20, 2),
  ADD COLUMN open_at timestamptz DEFAULT '-infinity',
  ADD CONSTRAINT listing_hourly_candle CHECK (
    low > 0 AND low <= open AND open <= high AND low <= price AND price <= high
  ) NOT VALID;
ALTER TABLE listing_hourly ALTER COLUMN open_at DROP DEFAULT;

ALTER TABLE listing_daily
  ADD COLUMN open    numeric(20, 2),
  ADD COLUMN high    numeric(20, 2),
  ADD COLUMN low     numeric(20, 2),
  ADD COLUMN open_at timestamptz DEFAULT '-infinity',
  ADD CONSTRAINT listing_daily_candle CHECK (
    low > 0 AND low <= open AND open <= high AND low <= close AND close <= high
  ) NOT VALID;
ALTER TABLE listing_daily ALTER COLUMN open_at DROP DEFAULT;

COMMENT ON COLUMN listing_hourly.price IS
  'the close: price of the hour''s last observation (NULL: no listing at that moment)';
COMMENT ON COLUMN listing_hourly.count IS 'listing count of the hour''s last observation (the close''s)';
COMMENT ON COLUMN listing_hourly.observed_at IS 'when the close was observed';
COMMENT ON COLUMN listing_hourly.open IS
  'price of the hour''s first priced observation; NULL if none was priced, or open_at = -infinity';
COMMENT ON COLUMN listing_hourly.high IS 'highest price observed in the hour; NULL as open';
COMMENT ON COLUMN listing_hourly.low IS 'lowest price observed in the hour; NULL as open';
COMMENT ON COLUMN listing_hourly.open_at IS
  'when the open was observed; NULL: no priced observation; -infinity: row written before migration 0005, open/high/low unknown';

COMMENT ON COLUMN listing_daily.close IS 'price of the UTC day''s last priced observation';
COMMENT ON COLUMN listing_daily.count IS 'listing count of the close''s observation';
COMMENT ON COLUMN listing_daily.observed_at IS 'when the close was observed';
COMMENT ON COLUMN listing_daily.open IS
  'price of the day''s first priced observation; NULL for the history-only marketplace (closes only) and when open_at = -infinity';
COMMENT ON COLUMN listing_daily.high IS 'highest price observed in the day; NULL as open';
COMMENT ON COLUMN listing_daily.low IS 'lowest price observed in the day; NULL as open';
COMMENT ON COLUMN listing_daily.open_at IS
  'when the open was observed; NULL for the history-only marketplace; -infinity: row written before migration 0005, open/high/low unknown';
