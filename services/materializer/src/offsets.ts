/**
 * Stored offsets that cannot lie. A next_offset in consumer_offsets is a position in one Kafka
 * log; the same topic name and partition in another cluster (after `make clean`, or a changed
 * KAFKA_BROKERS) or in a topic deleted and created again is another log, and applying it there
 * drops every record below it as "already applied" — silently: Kafka shows lag 0, nothing is
 * applied and nothing is logged.
 *
 * So every row is bound to the cluster id it counts records of, and the materializer checks its
 * rows against the cluster before it consumes, on every partition assignment, and inside every
 * batch's transaction. A mismatch stops the materializer with `offsets_mismatch` (not retryable:
 * waiting does not make another cluster's offsets right); an operator resets (docs/architecture.md:
 * "Offsets from another cluster"). Rows stored before migration 0004 have no cluster id: they are
 * adopted — bound to the current cluster — at start-up, provided their offsets fit its logs.
 *
 * Topic identity: Kafka has topic ids (KIP-516), but kafkajs 2.2.4 speaks Metadata v6 and never
 * sees them (they arrive in v10). Instead a topic is the cluster id plus its name, and a log
 * that no longer reaches the stored position gives a recreated topic away: a stored next_offset
 * past the partition's high watermark, or a stored partition the topic does not have (partitions
 * can be added, never removed, so fewer means a new topic). Not recorded: the partition count
 * (adding partitions is a legitimate change) and the log start (retention moves it). What this
 * cannot see is a topic recreated in the same cluster that has since grown past every stored
 * position; topic ids would, once the client exposes them.
 */
import { AppError } from '@skinprices/domain';
import type { Pool, PoolClient } from '@skinprices/store';
import type { Admin, Kafka } from 'kafkajs';
import { kafkaGroups } from './groups.js';

/** One row of consumer_offsets, as the checks need it. */
export interface StoredOffset {
  topic: string;
  partition: number;
  nextOffset: bigint;
  /** NULL for rows stored before migration 0004. */
  clusterId: string | null;
}

/**
 * Per topic, the partitions' high watermarks as the cluster reports them now; a topic missing
 * from the map was asked about and does not exist.
 */
export type TopicEnds = ReadonlyMap<string, ReadonlyMap<number, bigint>>;

export type OffsetMismatch =
  | { reason: 'cluster'; topic: string; partition: number; nextOffset: bigint; stored: string; actual: string }
  | { reason: 'beyond_end'; topic: string; partition: number; nextOffset: bigint; end: bigint }
  | { reason: 'no_topic'; topic: string; partition: number; nextOffset: bigint }
  | { reason: 'no_partition'; topic: string; partition: number; nextOffset: bigint; partitions: number };

/**
 * What is wrong with one stored offset, if anything. Pure. `end` undefined: not measured (the
 * in-transaction check has the batch's high watermark, the start-up check the cluster's).
 * A row without a cluster id passes the cluster comparison (it is adopted) but not the end's.
 */
export function storedOffsetMismatch(
  row: StoredOffset,
  clusterId: string,
  end: bigint | undefined,
): OffsetMismatch | undefined {
  const at = { topic: row.topic, partition: row.partition, nextOffset: row.nextOffset };
  if (row.clusterId !== null && row.clusterId !== clusterId)
    return { reason: 'cluster', ...at, stored: row.clusterId, actual: clusterId };
  // next_offset is one past the last applied record: equal to the end is caught up, past it is
  // a position this log never had.
  if (end !== undefined && row.nextOffset > end) return { reason: 'beyond_end', ...at, end };
  return undefined;
}

/** Every stored offset checked against the cluster's logs now. Pure. */
export function offsetMismatches(rows: readonly StoredOffset[], clusterId: string, ends: TopicEnds): OffsetMismatch[] {
  const out: OffsetMismatch[] = [];
  for (const row of rows) {
    const partitions = ends.get(row.topic);
    const at = { topic: row.topic, partition: row.partition, nextOffset: row.nextOffset };
    const foreign = storedOffsetMismatch(row, clusterId, undefined);
    if (foreign) out.push(foreign);
    else if (!partitions) out.push({ reason: 'no_topic', ...at });
    else if (!partitions.has(row.partition)) out.push({ reason: 'no_partition', ...at, partitions: partitions.size });
    else {
      const beyond = storedOffsetMismatch(row, clusterId, partitions.get(row.partition));
      if (beyond) out.push(beyond);
    }
  }
  return out;
}

export function describeMismatch(m: OffsetMismatch): string {
  const where = `${m.topic}[${m.partition}] stored next_offset ${m.nextOffset}`;
  switch (m.reason) {
    case 'cluster':
      return `${where} counts records of Kafka cluster ${m.stored}, connected to cluster ${m.actual}`;
    case 'beyond_end':
      return `${where} is past the partition's end offset ${m.end} (topic recreated, or another cluster)`;
    case 'no_topic':
      return `${where}: the topic does not exist in this cluster`;
    case 'no_partition':
      return `${where}: the topic has only ${m.partitions} partitions (recreated)`;
  }
}

/** How an operator gets out of it; repeated in every message so the log line alone suffices. */
const RESET_HINT =
  'rebuild the read model from this cluster with `make replay`, or drop the stored offsets with ' +
  '`make reset-offsets ARGS=--yes` (materializer stopped; docs/architecture.md: "Offsets from another cluster")';

/** The typed error that stops the materializer: not retryable, names every bad row. */
export function offsetsMismatchError(groupId: string, mismatches: readonly OffsetMismatch[]): AppError {
  const shown = mismatches.slice(0, 5).map(describeMismatch);
  const more = mismatches.length > shown.length ? `; and ${mismatches.length - shown.length} more` : '';
  return new AppError(
    'offsets_mismatch',
    `stored offsets of consumer group '${groupId}' do not belong to the Kafka logs being consumed: ` +
      `${shown.join('; ')}${more}. Applying would skip records; stopping. To reset: ${RESET_HINT}`,
    {
      details: {
        groupId,
        // bigint does not survive JSON (logs): offsets as decimal strings.
        mismatches: mismatches.map((m) =>
          JSON.parse(JSON.stringify(m, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))),
        ),
      },
    },
  );
}

export function isOffsetsMismatch(err: unknown): err is AppError {
  return err instanceof AppError && err.code === 'offsets_mismatch';
}

/** The cluster id Kafka reports (stable for the cluster's life; a new one after `make clean`). */
export async function clusterIdOf(admin: Admin): Promise<string> {
  const { clusterId } = await admin.describeCluster();
  if (!clusterId) throw new AppError('kafka_unavailable', 'the Kafka cluster reported no cluster id');
  return clusterId;
}

/** High watermarks of `topics` (those that exist); one ListOffsets per topic. */
async function topicEnds(admin: Admin, topics: readonly string[]): Promise<TopicEnds> {
  const existing = new Set(await admin.listTopics());
  const ends = new Map<string, Map<number, bigint>>();
  for (const topic of new Set(topics)) {
    if (!existing.has(topic)) continue;
    const offsets = await admin.fetchTopicOffsets(topic);
    ends.set(topic, new Map(offsets.map((o) => [o.partition, BigInt(o.high)])));
  }
  return ends;
}

async function storedOffsets(
  db: Pool | PoolClient,
  groupId: string,
  scope: Readonly<Record<string, readonly number[]>>,
): Promise<StoredOffset[]> {
  const { rows } = await db.query<{ topic: string; partition: number; next_offset: string; cluster_id: string | null }>(
    `SELECT o.topic, o.partition, o.next_offset, o.cluster_id
     FROM consumer_offsets o JOIN jsonb_each($2::jsonb) s(topic, parts) ON s.topic = o.topic
     WHERE o.group_id = $1 AND (jsonb_array_length(s.parts) = 0 OR s.parts @> to_jsonb(o.partition))
     ORDER BY o.topic, o.partition`,
    [groupId, JSON.stringify(scope)],
  );
  return rows.map((r) => ({
    topic: r.topic,
    partition: r.partition,
    nextOffset: BigInt(r.next_offset),
    clusterId: r.cluster_id,
  }));
}

export interface VerifyResult {
  /** Rows compared with the cluster. */
  checked: number;
  /** Rows without a cluster id that were bound to this one. */
  adopted: number;
}

/**
 * Checks the group's stored offsets for `scope` (topic → partitions; an empty list: every stored
 * partition of the topic) against the cluster, and adopts rows stored before migration 0004.
 * Throws `offsets_mismatch` (adopting nothing) if any row does not fit.
 *
 * Adoption is safe because it only binds rows that passed the end check: a row from before 0004
 * that belongs to an older cluster either lies past this cluster's ends (caught) or, if this
 * cluster's log has grown past it, cannot be told from a right one — the one case no check
 * without a stored cluster id can see, and the reason rows carry one.
 */
export async function verifyStoredOffsets(
  pool: Pool,
  admin: Admin,
  options: { groupId: string; clusterId: string; scope: Readonly<Record<string, readonly number[]>> },
): Promise<VerifyResult> {
  const rows = await storedOffsets(pool, options.groupId, options.scope);
  if (rows.length === 0) return { checked: 0, adopted: 0 };
  const ends = await topicEnds(
    admin,
    rows.map((r) => r.topic),
  );
  const mismatches = offsetMismatches(rows, options.clusterId, ends);
  if (mismatches.length > 0) throw offsetsMismatchError(options.groupId, mismatches);
  const legacy = rows.filter((r) => r.clusterId === null);
  if (legacy.length === 0) return { checked: rows.length, adopted: 0 };
  const adopted = await pool.query(
    `UPDATE consumer_offsets SET cluster_id = $2, bound_at = now()
     WHERE group_id = $1 AND cluster_id IS NULL AND (topic, partition) IN (SELECT * FROM unnest($3::text[], $4::int[]))`,
    [options.groupId, options.clusterId, legacy.map((r) => r.topic), legacy.map((r) => r.partition)],
  );
  return { checked: rows.length, adopted: adopted.rowCount ?? 0 };
}

/**
 * Moves the group's stored offsets of `scope` (topic → partitions) up to their logs' start where
 * retention has deleted records below them unread (the 7-day state topics, for a materializer
 * that was away longer, or a replay of them), and stores the start for a partition with no row
 * whose log no longer begins at 0. Nothing below a log's start can be read, so the position is
 * where consuming resumes anyway; stored, it makes the markers whose end offsets lie below it
 * ready (applyReadyMarkers), and a partition whose records have all expired caught up. Returns
 * the partitions moved, with the records they skipped.
 */
export async function advanceToLogStart(
  pool: Pool,
  admin: Admin,
  options: { groupId: string; clusterId: string; scope: Readonly<Record<string, readonly number[]>> },
): Promise<{ topic: string; partition: number; skipped: bigint }[]> {
  const moved: { topic: string; partition: number; skipped: bigint }[] = [];
  for (const [topic, partitions] of Object.entries(options.scope)) {
    if (partitions.length === 0) continue;
    const starts = new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, BigInt(o.low)]));
    const stored = new Map(
      (await storedOffsets(pool, options.groupId, { [topic]: partitions })).map((r) => [r.partition, r.nextOffset]),
    );
    for (const partition of partitions) {
      const start = starts.get(partition) ?? 0n;
      const at = stored.get(partition) ?? 0n;
      if (start <= at) continue;
      const { rowCount } = await pool.query(
        `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, cluster_id, bound_at)
         VALUES ($1, $2, $3, $4, $5, now())
         ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset
         WHERE consumer_offsets.next_offset < excluded.next_offset`,
        [options.groupId, topic, partition, start.toString(), options.clusterId],
      );
      if ((rowCount ?? 0) > 0) moved.push({ topic, partition, skipped: start - at });
    }
  }
  return moved;
}

/**
 * A Kafka group that has committed nothing for `topics` (new: the other kinds' lane's on the first
 * start after the lanes came, or one Kafka expired) is given PostgreSQL's stored offsets as its
 * starting point, so its consumer starts where the read model is instead of at the start of every
 * log (a re-read that skips everything by those offsets, but fetches and decodes it all first).
 * Only the start moves: what is applied is still decided by the stored offsets in each batch's
 * transaction. Call after verifyStoredOffsets (the offsets count this cluster's records). Kafka
 * refuses while the group has live members (another process of the group started first and its
 * consumer already chose where to start): then nothing is seeded. Returns the partitions seeded.
 */
export async function seedKafkaGroup(
  pool: Pool,
  admin: Admin,
  options: { groupId: string; kafkaGroup: string; topics: readonly string[] },
): Promise<number> {
  const committed = await admin.fetchOffsets({ groupId: options.kafkaGroup, topics: [...options.topics] });
  if (committed.some((t) => t.partitions.some((p) => p.offset !== '-1'))) return 0;
  const rows = await storedOffsets(pool, options.groupId, Object.fromEntries(options.topics.map((t) => [t, []])));
  const byTopic = new Map<string, { partition: number; offset: string }[]>();
  for (const r of rows) {
    const list = byTopic.get(r.topic) ?? [];
    list.push({ partition: r.partition, offset: r.nextOffset.toString() });
    byTopic.set(r.topic, list);
  }
  for (const [topic, partitions] of byTopic) await admin.setOffsets({ groupId: options.kafkaGroup, topic, partitions });
  return rows.length;
}

export interface ResetPlan {
  clusterId: string;
  rows: (StoredOffset & { mismatch: string | null })[];
  /** Markers not applied yet whose end offsets count records of the logs being reset. */
  pendingMarkers: number;
}

/**
 * What `reset-offsets` would delete, each row with what is wrong with it (null: nothing; a
 * healthy row is deleted too, and its partition re-read from the log's start).
 */
export async function planOffsetReset(pool: Pool, kafka: Kafka, groupId: string): Promise<ResetPlan> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const clusterId = await clusterIdOf(admin);
    const { rows: topics } = await pool.query<{ topic: string }>(
      'SELECT DISTINCT topic FROM consumer_offsets WHERE group_id = $1',
      [groupId],
    );
    const scope = Object.fromEntries(topics.map((t) => [t.topic, [] as number[]]));
    const rows = await storedOffsets(pool, groupId, scope);
    const ends = await topicEnds(
      admin,
      rows.map((r) => r.topic),
    );
    const pending = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM poll_cycles WHERE applied_at IS NULL AND data_topic = ANY($1::text[])`,
      [topics.map((t) => t.topic)],
    );
    return {
      clusterId,
      rows: rows.map((r) => {
        const m = offsetMismatches([r], clusterId, ends)[0];
        return { ...r, mismatch: m ? describeMismatch(m) : null };
      }),
      pendingMarkers: pending.rows[0]?.n ?? 0,
    };
  } finally {
    await admin.disconnect();
  }
}

/**
 * Forgets where the group was: deletes its stored offsets and the markers still waiting on them
 * (their end offsets count records of the old logs), and the group's committed offsets in Kafka
 * (the consumer starts from those when it has them, and PostgreSQL's are gone), so the next
 * materializer reads every partition from the start of its log. Rows of the read model stay; the
 * observed_at guard keeps records older than a row from changing it. Refused while a
 * materializer runs on the schema (it holds the schema's advisory lock shared) or while the
 * group has live members in Kafka.
 */
export async function resetStoredOffsets(
  pool: Pool,
  kafka: Kafka,
  options: { groupId: string; lockSql: string },
): Promise<{ offsets: number; markers: number; kafkaGroupDeleted: boolean }> {
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${options.lockSql}) AS ok`);
    if (!rows[0]?.ok)
      throw new AppError('busy', 'a materializer (or a replay) is running on this schema: stop it first');
    try {
      // Both lanes' groups (groups.ts).
      const kafkaGroupDeleted = await deleteKafkaGroups(kafka, kafkaGroups(options.groupId));
      await client.query('BEGIN');
      const topics = await client.query<{ topic: string }>(
        'SELECT DISTINCT topic FROM consumer_offsets WHERE group_id = $1',
        [options.groupId],
      );
      const markers = await client.query(
        'DELETE FROM poll_cycles WHERE applied_at IS NULL AND data_topic = ANY($1::text[])',
        [topics.rows.map((t) => t.topic)],
      );
      const offsets = await client.query('DELETE FROM consumer_offsets WHERE group_id = $1', [options.groupId]);
      await client.query('COMMIT');
      return { offsets: offsets.rowCount ?? 0, markers: markers.rowCount ?? 0, kafkaGroupDeleted };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      await client.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    }
  } finally {
    client.release();
  }
}

/**
 * true: at least one deleted; false: Kafka had none of them. Refused, before anything is deleted,
 * when any of them has live members.
 */
async function deleteKafkaGroups(kafka: Kafka, groupIds: readonly string[]): Promise<boolean> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([...groupIds]);
    const existing = groups.filter((g) => g.state !== 'Dead');
    for (const g of existing)
      if (g.members.length > 0)
        throw new AppError(
          'busy',
          `consumer group '${g.groupId}' has ${g.members.length} live member(s) in Kafka: stop every materializer first`,
        );
    if (existing.length === 0) return false;
    await admin.deleteGroups(existing.map((g) => g.groupId));
    return true;
  } finally {
    await admin.disconnect();
  }
}
