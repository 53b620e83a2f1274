-- Liquidity recomputed for the items whose inputs moved, not the whole catalogue (issue 12:
-- "only the rows a marker touches are recomputed where that is possible"). Every applied poll
-- cycle of any marketplace queues a recomputation (markers.ts queueDerived), and each one read
-- and aggregated all ~430k listing rows, the 30-day sales and the buy orders: 2.4-8 s of one
-- PostgreSQL backend, 47-84 s of each ~4.5-minute freshness phase of the platform benchmark, on
-- the two cores ingest and the API's list patches share.
--
-- The refresh keeps the snapshot it was taken under and its clock. The next one reads the rows
-- written by transactions not older than that snapshot's xmin (age(xmin), as the API's list
-- patches read, migration 0012; a superset of what the snapshot did not see, which stays right
-- for the ingest path's subtransactions) and the sales the clock moved across the 7- and 30-day
-- windows, and recomputes those items only (derived.ts LIQUIDITY_DIRTY). Not a function of the
-- topics (a snapshot and the moments refreshes ran): left out of the checksums.
CREATE TABLE liquidity_refresh (
  id       boolean PRIMARY KEY DEFAULT true CHECK (id),
  snapshot pg_snapshot NOT NULL,
  clock    timestamptz NOT NULL
);
COMMENT ON TABLE liquidity_refresh IS
  'The last liquidity refresh: the snapshot it read under and the read model''s clock it computed for';
