-- What operators and /v1/status need to see the materializer itself: why a record was
-- dead-lettered, a heartbeat and lag per materializer process, and wall-clock freshness.

-- ---- dead letters: decoded records PostgreSQL refused join the undecodable ones ---------------
ALTER TABLE dead_letters
  ADD COLUMN reason   text NOT NULL DEFAULT 'decode' CHECK (reason IN ('decode', 'sql')),
  ADD COLUMN sqlstate text;
COMMENT ON COLUMN dead_letters.reason IS
  'decode: the record could not be decoded (schema, bytes); sql: it decoded but PostgreSQL refused it alone (poison record, isolated from its batch)';
COMMENT ON COLUMN dead_letters.sqlstate IS
  'PostgreSQL error code for reason = sql (e.g. 22021 for U+0000 in text, 22003 numeric out of range); NULL for decode';
COMMENT ON COLUMN dead_letters.error IS
  'the decoder''s or the server''s message (U+0000 spelled as \u0000)';

-- ---- wall-clock freshness ------------------------------------------------------------------
-- last_*_at before this are upstream times (the marketplace's clock, replayable); these two are
-- when the read model applied the marker, so a stalled pipeline shows as stale in real time.
ALTER TABLE market_freshness
  ADD COLUMN last_applied_at          timestamptz,
  ADD COLUMN last_complete_applied_at timestamptz;
COMMENT ON COLUMN market_freshness.last_applied_at IS
  'wall clock (now()) when the marker of last_cycle_id was applied, whatever its outcome; NULL until a marker is applied after migration 0003';
COMMENT ON COLUMN market_freshness.last_complete_applied_at IS
  'wall clock (now()) when the newest COMPLETE marker of this market and kind was applied; NULL if none since migration 0003';

-- ---- one row per running materializer process ----------------------------------------------
-- Written every few seconds by each process (materializer/src/heartbeat.ts). A dead process's
-- row stops moving; live members delete rows silent for an hour, so a replaced process
-- disappears while a lone dead one stays visible.
CREATE TABLE materializer_heartbeat (
  member_id        text PRIMARY KEY,
  group_id         text NOT NULL,
  host             text NOT NULL,
  pid              integer NOT NULL,
  kafka_member_id  text,
  state            text NOT NULL,
  started_at       timestamptz NOT NULL,
  heartbeat_at     timestamptz NOT NULL,
  last_batch_at    timestamptz,
  lag              bigint,
  lag_by_partition jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX materializer_heartbeat_by_group ON materializer_heartbeat (group_id, heartbeat_at);
COMMENT ON TABLE materializer_heartbeat IS
  'one row per materializer process; heartbeat_at older than ~3 intervals means the process is dead or hung';
COMMENT ON COLUMN materializer_heartbeat.member_id IS 'host/pid/start: stable for the process''s lifetime';
COMMENT ON COLUMN materializer_heartbeat.group_id IS 'Kafka consumer group (and key of consumer_offsets)';
COMMENT ON COLUMN materializer_heartbeat.host IS 'hostname of the process';
COMMENT ON COLUMN materializer_heartbeat.pid IS 'operating-system process id';
COMMENT ON COLUMN materializer_heartbeat.kafka_member_id IS 'the group member id Kafka gave it at its last join; NULL before the first';
COMMENT ON COLUMN materializer_heartbeat.state IS 'the consumer loop''s state: migrating, consuming, erroring (batches failing and retried), stopping';
COMMENT ON COLUMN materializer_heartbeat.started_at IS 'wall clock when the process started consuming';
COMMENT ON COLUMN materializer_heartbeat.heartbeat_at IS 'wall clock (now()) of the last heartbeat; written every HEARTBEAT_INTERVAL_MS';
COMMENT ON COLUMN materializer_heartbeat.last_batch_at IS 'wall clock of the last committed batch; NULL before the first (an idle, caught-up consumer commits none)';
COMMENT ON COLUMN materializer_heartbeat.lag IS
  'records behind over the partitions assigned to this member: sum of (partition end offset - stored next_offset); NULL until measured';
COMMENT ON COLUMN materializer_heartbeat.lag_by_partition IS
  'the same per partition: [{"topic", "partition", "end", "next", "lag"}], offsets as JSON numbers';
