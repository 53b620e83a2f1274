-- The outlier guard's second look (markers.ts, judgeAgain) in a transaction of its own (issue 12,
-- cold start). A listings marker judged again, inside the markers' transaction, every row of the
-- items its cycle wrote on every marketplace of their currency. In a cold start each clump of
-- first cycles re-judged its currency's catalogue as it stood so far (the USD group's ~200k rows
-- about four times, 4-5 s a transaction on the platform benchmark), and the status of the
-- marketplaces in the clump waited for it: the last marketplace's first cycle became visible
-- 4.8 s after its marker was applied. Now the markers' transaction queues its listings cycles here
-- and commits; the derive path judges what is queued in a transaction of its own, deferred while
-- a listings marker is on its way in (deriver.ts), and deletes what it judged.
--
-- Rows are only inserted by the markers' transaction and deleted by id by the judging one, as in
-- derive_pending (0014), and both hold the derive path's advisory lock. queued_at bounds the
-- deferral (at most a minute from the oldest row) whichever process queued it, and across restarts.
CREATE TABLE judge_pending (
  id        bigserial PRIMARY KEY,
  market    text NOT NULL,
  cycle_id  text NOT NULL,
  queued_at timestamptz NOT NULL DEFAULT now()
);
