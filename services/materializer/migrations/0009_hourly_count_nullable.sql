-- Imported hourly candles (history.v1's `hours`, the warm demo) carry the listing count at the
-- hour's end only where the upstream reports one, as imported daily closes do (0002 made
-- listing_daily.count nullable for them). NULL means "not reported", never zero listings.
-- ALTER on the partitioned parent reaches every day partition and the ones created later.
ALTER TABLE listing_hourly ALTER COLUMN count DROP NOT NULL;

COMMENT ON COLUMN listing_hourly.count IS
  'listing count of the hour''s last observation (the close''s); NULL: an imported hour whose upstream did not report it';
