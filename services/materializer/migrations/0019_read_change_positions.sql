-- One change position for the read model: every change to a served row gets a number that becomes
-- visible in commit order, and readers (the API's list bodies and caches) advance by it. This
-- replaces "rows written since a snapshot" (0011, 0012, 0018: xmin, age() and pg_snapshot in the
-- read contract), which scanned every row of a marketplace for its age on each list refresh and
-- which a streaming replica cannot answer for a reader that learns of changes by LISTEN.
--
-- read_changes is a journal: one entry per transaction and tag (`listing:<market>` for listing
-- rows, `scores` for liquidity scores, other tags such as `buyorder:<market>` or `derived` for
-- what readers rebuild whole), with the keys (name, phase) of the rows whose served values changed,
-- or NULL keys where the tag names no rows. Its positions come from a sequence drawn under a
-- transaction-scoped advisory lock taken at COMMIT (a deferred trigger) and held until the commit
-- ends, the technique of price_change_log (0006): a transaction with a higher position cannot
-- become visible before one with a lower position, so a reader that sees position n has seen
-- everything below n it will ever see, on the primary and, in WAL order, on every standby.
--
-- Writers do not call anything: statement triggers on the served tables note the keys whose served
-- values changed (a rewrite with equal values is no change) in a temporary table, and the first
-- note of a transaction queues the deferred trigger that numbers them at commit. A transaction that
-- changes nothing served draws no position and takes no lock.
CREATE SEQUENCE read_change_seq;

CREATE TABLE read_changes (
  pos       bigint PRIMARY KEY,
  tag       text NOT NULL,
  names     text[],
  phases    text[],
  logged_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((names IS NULL) = (phases IS NULL))
);
CREATE INDEX read_changes_by_tag ON read_changes (tag, pos);

-- Entries at or below pruned_through are deleted (a reader behind it reads whole again); `epoch`
-- names this journal, so a reader of a read model rebuilt by `make replay` (a new schema, a new
-- journal whose numbers restart) knows its position means nothing there.
CREATE TABLE read_change_state (
  id             boolean PRIMARY KEY DEFAULT true CHECK (id),
  pruned_through bigint NOT NULL DEFAULT 0,
  epoch          text NOT NULL DEFAULT left(replace(gen_random_uuid()::text, '-', ''), 12)
);
INSERT INTO read_change_state DEFAULT VALUES;

-- When the row's served price or count last changed (as observed upstream): the `updated_at` the
-- API serves, equal to the one prices.current.v1 carries for the same change. observed_at stays
-- the time of the newest observation (what the observed_at guard and the cycle markers compare).
-- Rows written before this column take their observation time (and a row written without it, its
-- observation time in the view).
ALTER TABLE listings_current ADD COLUMN changed_at timestamptz;
UPDATE listings_current SET changed_at = observed_at;

-- Numbers the transaction's noted changes (at COMMIT, deferred) and sends the NOTIFY that wakes
-- readers (a hint only: readers also poll the position). The lock is the schema's (one read model
-- per schema). Every ~1,024 positions, entries older than 15 minutes are pruned, found from the
-- oldest position on (as many rows read as are deleted): a reader further behind reads whole again.
-- It ends by taking back the transaction's queued state with its notes. The trigger that runs it
-- must stay deferred (docs/decisions/0001-change-position.md).
CREATE FUNCTION read_changes_commit() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  tags text[];
  head bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('skinprices-read-changes:' || current_schema()));
  WITH k AS (SELECT DISTINCT tag, name, phase FROM pg_temp.read_change_keys),
  j AS (
    INSERT INTO read_changes (pos, tag, names, phases)
    SELECT nextval('read_change_seq'), tag,
           CASE WHEN bool_and(name IS NOT NULL) THEN array_agg(name) END,
           CASE WHEN bool_and(name IS NOT NULL) THEN array_agg(phase) END
    FROM k GROUP BY tag
    RETURNING pos, tag
  )
  SELECT array_agg(tag), max(pos) INTO tags, head FROM j;
  DELETE FROM pg_temp.read_change_keys;
  DELETE FROM pg_temp.read_change_due;
  PERFORM set_config('skinprices.read_changes_due', 'off', true);
  IF head IS NULL THEN
    RETURN;
  END IF;
  IF head % 1024 < array_length(tags, 1) THEN
    WITH kept AS (
      SELECT coalesce(
        (SELECT pos FROM read_changes WHERE logged_at >= now() - interval '15 minutes' ORDER BY pos LIMIT 1),
        head + 1) AS first
    ),
    gone AS (DELETE FROM read_changes WHERE pos < (SELECT first FROM kept) RETURNING pos)
    UPDATE read_change_state SET pruned_through = greatest(pruned_through, (SELECT max(pos) FROM gone))
    WHERE EXISTS (SELECT 1 FROM gone);
  END IF;
  PERFORM pg_notify('skinprices_readmodel', current_schema() || chr(9) || array_to_string(tags, ','));
END $$;

-- The session's note-taking tables and the trigger that numbers them at COMMIT. Its function is
-- temporary too and calls read_changes_commit by name (resolved on the search path when it runs),
-- so no temporary object depends on a schema's function: a schema dropped CASCADE while another
-- session ends would otherwise lock the same temporary trigger from both sides (seen: deadlock
-- detected, in the tests' clean-up).
CREATE FUNCTION read_changes_ready() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF to_regclass('pg_temp.read_change_keys') IS NULL THEN
    CREATE TEMP TABLE read_change_keys (tag text NOT NULL, name text, phase text) ON COMMIT DELETE ROWS;
    CREATE TEMP TABLE read_change_due (id boolean PRIMARY KEY) ON COMMIT DELETE ROWS;
    CREATE FUNCTION pg_temp.read_changes_at_commit() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
      PERFORM read_changes_commit();
      RETURN NULL;
    END $f$;
    CREATE CONSTRAINT TRIGGER read_changes_at_commit AFTER INSERT ON pg_temp.read_change_due
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.read_changes_at_commit();
  END IF;
END $$;

-- Notes keys — (tag, name, phase) triples; NULL names: the whole tag — as changed by the running
-- transaction, in the session's note-taking table (temporary, emptied at commit), and queues
-- read_changes_commit for its COMMIT: the first row of read_change_due fires it, once. The
-- transaction-local setting says it is queued (a rolled-back savepoint takes both back).
CREATE FUNCTION note_changes(tags text[], names text[], phases text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(tags), 0) = 0 THEN
    RETURN;
  END IF;
  IF current_setting('skinprices.read_changes_due', true) IS DISTINCT FROM 'on' THEN
    PERFORM read_changes_ready();
  END IF;
  INSERT INTO pg_temp.read_change_keys (tag, name, phase) SELECT * FROM unnest(tags, names, phases);
  IF current_setting('skinprices.read_changes_due', true) IS DISTINCT FROM 'on' THEN
    INSERT INTO pg_temp.read_change_due VALUES (true) ON CONFLICT DO NOTHING;
    PERFORM set_config('skinprices.read_changes_due', 'on', true);
  END IF;
END $$;

-- Tags whose readers rebuild whole (no keys): the ingest and derive paths note what they touched.
CREATE FUNCTION note_read_changes(tags text[]) RETURNS void
LANGUAGE sql AS $$
  SELECT note_changes(tags, '{}', '{}')
$$;

-- A row inserted, or updated with a served column changed (the update trigger's WHEN). Per row: a
-- FULL cycle rewrites every row for its observation time and cycle and changes almost none, and
-- the WHEN skips those without a call, where a statement trigger captures every row in transition
-- tables (spilled to disk past work_mem: 300,000 inserted rows took 2.2× as long with one).
CREATE FUNCTION note_listing_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('skinprices.read_changes_due', true) = 'on' THEN
    INSERT INTO pg_temp.read_change_keys VALUES ('listing:' || NEW.market, NEW.market_hash_name, NEW.phase);
  ELSE
    PERFORM note_changes(ARRAY['listing:' || NEW.market], ARRAY[NEW.market_hash_name], ARRAY[NEW.phase]);
  END IF;
  RETURN NULL;
END $$;

-- The ingest path's merge notes the rows it inserts itself, in one set (a cold start inserts ~430k
-- rows; 5–30 µs a row in a trigger), and says so in a transaction-local setting for its statement.
CREATE TRIGGER listings_inserted AFTER INSERT ON listings_current FOR EACH ROW
  WHEN (current_setting('skinprices.listings_noted', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION note_listing_row();
-- The served columns, as api_listings_v1 shows them.
CREATE TRIGGER listings_updated AFTER UPDATE ON listings_current FOR EACH ROW
  WHEN ((NEW.price, NEW.count, NEW.exterior, NEW.stattrak, NEW.souvenir, NEW.template_id, NEW.item_page_url,
         coalesce(NEW.changed_at, NEW.observed_at), NEW.change_24h, NEW.change_7d, NEW.change_30d, NEW.change_90d,
         NEW.avg_7d, NEW.avg_30d, NEW.avg_90d, NEW.is_outlier, NEW.confidence)
        IS DISTINCT FROM
        (OLD.price, OLD.count, OLD.exterior, OLD.stattrak, OLD.souvenir, OLD.template_id, OLD.item_page_url,
         coalesce(OLD.changed_at, OLD.observed_at), OLD.change_24h, OLD.change_7d, OLD.change_30d, OLD.change_90d,
         OLD.avg_7d, OLD.avg_30d, OLD.avg_90d, OLD.is_outlier, OLD.confidence))
  EXECUTE FUNCTION note_listing_row();

-- Liquidity scores: inserted, changed (refreshLiquidity writes only changed ones) or deleted.
CREATE FUNCTION note_scores() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM note_changes(array_agg('scores'::text), array_agg(market_hash_name), array_agg(phase)) FROM changed_rows;
  RETURN NULL;
END $$;

CREATE TRIGGER scores_inserted AFTER INSERT ON item_liquidity_score
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION note_scores();
CREATE TRIGGER scores_updated AFTER UPDATE ON item_liquidity_score
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION note_scores();
CREATE TRIGGER scores_deleted AFTER DELETE ON item_liquidity_score
  REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION note_scores();

-- The read contract without transaction internals: the xid and age columns go (only the API read
-- them, and it reads positions now), changed_at comes. Dropped and created, since a view cannot
-- lose columns in place; the API of this version reads only these.
DROP VIEW api_listings_v1;
CREATE VIEW api_listings_v1 AS
SELECT c.market, c.market_hash_name, c.phase, item_id(c.market_hash_name, c.phase) AS id, c.price, c.count,
       c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
       coalesce(c.changed_at, c.observed_at) AS changed_at,
       c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
       l.score AS liquidity, c.is_outlier, c.confidence
FROM listings_current c
LEFT JOIN item_liquidity_score l USING (market_hash_name, phase);

DROP VIEW api_liquidity_v1;
CREATE VIEW api_liquidity_v1 AS
SELECT market_hash_name, phase, score AS liquidity FROM item_liquidity_score;

CREATE VIEW api_read_changes_v1 AS
SELECT pos, tag, names, phases FROM read_changes;

CREATE VIEW api_read_change_state_v1 AS
SELECT epoch, pruned_through FROM read_change_state;

DROP FUNCTION xid8_of(xid);
