-- Stored offsets say which Kafka cluster they count records of. An offset is a position in one
-- log: after `make clean` (a new cluster) or a changed KAFKA_BROKERS, the same topic name and
-- partition number mean another log, and an offset from the old one silently skips every record
-- below it. The materializer compares these columns with the cluster it is connected to before
-- it consumes, and on every partition assignment (services/materializer/src/offsets.ts).
--
-- The topic's own identity (Kafka's topic id, KIP-516) is not stored: kafkajs 2.2.4 speaks
-- Metadata v6 and never sees topic ids (they arrive in v10). A topic deleted and created again
-- in the same cluster is caught instead by its end: a stored next_offset past the partition's
-- high watermark, or a stored partition the topic no longer has, stops the materializer too.

ALTER TABLE consumer_offsets
  ADD COLUMN cluster_id text,
  ADD COLUMN bound_at   timestamptz;

COMMENT ON COLUMN consumer_offsets.cluster_id IS
  'Kafka cluster id (DescribeCluster) whose log next_offset counts; NULL only for rows stored before migration 0004, adopted (bound to the current cluster) on the next start if their offsets fit its logs';
COMMENT ON COLUMN consumer_offsets.bound_at IS
  'wall clock when the row was bound to cluster_id: created by a batch, or adopted at start-up';
