-- Repeats are recognised before SQL (issue 42, item 1). A FULL cycle re-sent every listing of its
-- marketplace, and the materializer rewrote each one for its observed_at and cycle_id: that is how
-- a COMPLETE FULL marker knew what its cycle saw (every row it did not stamp was nulled). Pollers
-- now send the items a cycle no longer sees as removal records on FULL cycles too, and say so on
-- the cycle's records and marker (`removals_sent`); the materializer drops a record of such a
-- cycle that equals the row it serves (served.ts) and the marker removes nothing else. A marker
-- without the flag (older records, and each poller's first FULL cycle after it starts, when it
-- does not yet know what it said before) removes what it did not see, as before.
ALTER TABLE poll_cycles ADD COLUMN removals_sent boolean NOT NULL DEFAULT false;

-- Bumped, before any row is touched, by every marker that removes listings its cycle did not see:
-- the only writer of listings_current besides the ingest path. A materializer holding rows of the
-- marketplace in memory (served.ts) reads it in each listings batch and forgets them when it moved.
CREATE TABLE listing_removal_epochs (
  market text PRIMARY KEY,
  epoch  bigint NOT NULL
);
