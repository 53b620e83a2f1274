-- Liquidity becomes a daily figure (issue 42, item 5: derived values change when they mean
-- something). It was computed from the live state at the read model's clock: every buy-order
-- cycle re-draws the CNY bids, the 7- and 30-day sales windows slid with every marker, so about
-- every item's score moved a little on every refresh, and each moved score rewrote the item's row
-- in every price list: 22,901 served rows changed per real price change in a calm phase of the
-- platform benchmark (533,872-549,578 score rows against 24 price changes).
--
-- Now the score of day D (the clock's UTC day) is computed from the state at the start of D:
-- each listing marketplace's close of day D-1 (listing_daily: count and price), the sales of the
-- 7 and 30 days before the start of D, and the best CNY bid held at the start of D. It changes
-- when the day rolls over, and within the day only when late data about the days before arrive.
-- A pure function of the topics, as before: a replay computes the same scores.
--
-- The bid held at the start of a day needs the bid before the row's last observation: a buy-order
-- row keeps the last observation before the start of its observed day (price and time; NULL:
-- none known). Maintained by the ingest upsert (books.ts) and by the markers that clear a vanished
-- order (markers.ts), from the batch's own earlier observations and the stored row, so it does not
-- depend on how records were batched.
ALTER TABLE buyorders_current
  ADD COLUMN prior_price numeric(20, 2) CHECK (prior_price > 0),
  ADD COLUMN prior_at timestamptz;
COMMENT ON COLUMN buyorders_current.prior_price IS
  'The price of the last observation before the start of observed_at''s UTC day (NULL: no order then, or prior_at NULL)';
COMMENT ON COLUMN buyorders_current.prior_at IS
  'When that observation was made; NULL when none is known (the row was first seen that day, or stored before migration 0020)';

-- A history cycle restates closes of past days, which the day's scores read: the next refresh
-- then takes every item (the dirty set reads listing rows, buy orders and sales, not closes).
ALTER TABLE derive_pending ADD COLUMN restated boolean NOT NULL DEFAULT false;

-- The next refresh takes every item under the new rules.
DELETE FROM liquidity_refresh;

COMMENT ON TABLE item_liquidity IS
  'Liquidity of the clock''s UTC day D per item, from the state at the start of D: listing closes of D-1, sales of the 7 and 30 days before, the CNY bid held then (derived.ts)';
