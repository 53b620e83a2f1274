-- Room on each page for the next version of its rows (issue 12: the ingest path's cost per event).
-- The current-state tables are rewritten in place all day: every observation of a listing or a buy
-- order is an UPDATE of its row (a new observed_at at least), every snapshot cycle rewrites every
-- bucket, book and float buy order of its marketplace, and the liquidity refresh updates its rows.
-- With PostgreSQL's default fillfactor (100) a page has no room for the new version, so the update
-- goes to another page and every index of the table gets a new entry for it (and autovacuum then
-- cleans both). With room on the page and no indexed column changed (prices, counts, observed_at
-- and cycle_id are not indexed; listings_current's stats_day moves once a day), the update is HOT:
-- same page, no index entry.
--
-- Measured (2026-11-26, a 60k-row table shaped like float_ranged_current, ten cycles rewriting
-- every row with the snapshot kinds' guarded upsert, no vacuum in between, two runs each):
-- fillfactor 100: 6.28 / 6.32 s, 1,039 of 600,000 updates HOT, 75 MB with indexes;
-- fillfactor 70:  2.71 / 2.73 s, 517,962 HOT, 26 MB.
--
-- Applies to pages written from now on: a new deployment's tables (CI, make run, the benchmarks)
-- from their first row; an existing one's as autovacuum and updates move rows.
ALTER TABLE listings_current SET (fillfactor = 70);
ALTER TABLE buyorders_current SET (fillfactor = 70);
ALTER TABLE float_ranged_current SET (fillfactor = 70);
ALTER TABLE float_buyorders_current SET (fillfactor = 70);
ALTER TABLE order_book_current SET (fillfactor = 70);
ALTER TABLE item_liquidity SET (fillfactor = 70);
ALTER TABLE item_liquidity_score SET (fillfactor = 70);
