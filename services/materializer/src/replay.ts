/*
 * `make replay`: rebuilds the read model from the topics, from scratch.
 *
 *   locking ──▶ capturing ends ──▶ rebuilding (a fresh schema, a fresh consumer group, up to the
 *   captured ends) ──▶ checksums ──▶ swapping (optional) ──▶ done
 *
 * Subscribers hear no phantom changes: a replay writes no outbox rows (`outbox: false`), so
 * nothing it applies reaches price-changes.v1 or prices.current.v1. Building beside the live
 * schema and renaming at the end means readers never see a half-built model. The live
 * materializer must be stopped: it holds a shared advisory lock on its schema for its lifetime
 * and the replay takes it exclusively; a materializer started meanwhile waits for the swap.
 * After the swap it resumes from the rebuilt offsets (the captured ends), so events that arrived
 * during the replay are applied, and published, by the live materializer as usual.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '@skinprices/domain';
import { topicFor, type EventSerde } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import { createPool, ensureSchema, ident, type Pool, type PoolClient } from '@skinprices/store';
import type { Kafka } from 'kafkajs';
import { MATERIALIZED_KINDS } from './apply.js';
import { tableChecksums, type TableChecksum } from './checksums.js';
import { kafkaGroups } from './groups.js';
import { schemaLockSql } from './lock.js';
import { Materializer } from './materializer.js';
import type { MaterializerMetrics } from './metrics.js';

export type ReplayState = 'locking' | 'capturing' | 'rebuilding' | 'checksums' | 'swapping' | 'done';

export interface ReplayOptions {
  databaseUrl: string;
  /** The live read model's schema. */
  schema: string;
  /** The live consumer group: the rebuilt offsets are stored under it. */
  groupId: string;
  topicSuffix: string;
  migrationsDir: string;
  hourlyRetentionDays: number;
  /** Rename the rebuilt schema over the live one (keeping the old as `<schema>_previous`). */
  swap: boolean;
  /** Schema to rebuild into. @default `<schema>_rebuild` */
  target?: string;
}

/** What a replay runs with. */
interface ReplayDeps {
  kafka: Kafka;
  serde: EventSerde;
  logger: Logger;
  metrics?: MaterializerMetrics;
}

export interface ReplayResult {
  schema: string;
  events: number;
  ms: number;
  checksums: Record<string, TableChecksum>;
}

export async function replay(
  options: ReplayOptions,
  deps: ReplayDeps,
  onState: (s: ReplayState) => void = () => undefined,
): Promise<ReplayResult> {
  const started = Date.now();
  const { logger } = deps;
  const target = options.target ?? `${options.schema}_rebuild`;
  const admin = createPool({ databaseUrl: options.databaseUrl, max: 2, applicationName: 'replay' });
  const lock = await admin.connect();
  try {
    onState('locking');
    await lockSchema(lock, options.schema);

    onState('capturing');
    const { stopAt, total } = await captureEnds(deps.kafka, options.topicSuffix);
    logger.info({ target, partitions: stopAt.size, events: total.toString() }, 'replaying up to the current ends');

    onState('rebuilding');
    await admin.query(`DROP SCHEMA IF EXISTS ${ident(target)} CASCADE`);
    await ensureSchema(admin, target);
    // As many connections as the live materializer's batches (three listings and two other
    // partitions at once), the derive path, the schema lock and the catch-up check
    // (materializer.ts caps its concurrency to what the pool leaves).
    const pool = createPool({ databaseUrl: options.databaseUrl, schema: target, max: 10, applicationName: 'replay' });
    const replayGroup = `${options.groupId}.replay.${started}`;
    try {
      await rebuild(pool, replayGroup, stopAt, options, deps);
      await pool.query('UPDATE consumer_offsets SET group_id = $1 WHERE group_id = $2', [options.groupId, replayGroup]);
      onState('checksums');
      const checksums = await tableChecksums(pool);
      for (const group of kafkaGroups(replayGroup)) await deleteGroup(deps.kafka, group);

      let schema = target;
      if (options.swap) {
        onState('swapping');
        await swapSchemas(lock, options.schema, target);
        schema = options.schema;
      }
      onState('done');
      return { schema, events: Number(total), ms: Date.now() - started, checksums };
    } finally {
      await pool.end();
    }
  } finally {
    await lock.query(`SELECT pg_advisory_unlock_all()`).catch(() => undefined);
    lock.release();
    await admin.end();
  }
}

/** Takes the schema's lock exclusively, or throws `busy` while a materializer holds it. */
async function lockSchema(lock: PoolClient, schema: string): Promise<void> {
  const { rows } = await lock.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${schemaLockSql('$1')}) AS ok`, [
    schema,
  ]);
  if (!rows[0]?.ok) throw new AppError('busy', `a materializer is running on schema '${schema}': stop it, then replay`);
}

/**
 * Every consumed partition's current end (`topic:partition` → the first offset not to replay),
 * and the records there are to replay: what retention left of each partition.
 */
async function captureEnds(kafka: Kafka, topicSuffix: string): Promise<{ stopAt: Map<string, bigint>; total: bigint }> {
  const kafkaAdmin = kafka.admin();
  await kafkaAdmin.connect();
  const stopAt = new Map<string, bigint>();
  let total = 0n;
  try {
    for (const kind of MATERIALIZED_KINDS) {
      const topic = `${topicFor(kind).name}${topicSuffix}`;
      for (const p of await kafkaAdmin.fetchTopicOffsets(topic)) {
        stopAt.set(`${topic}:${p.partition}`, BigInt(p.high));
        total += BigInt(p.high) - BigInt(p.low);
      }
    }
  } finally {
    await kafkaAdmin.disconnect();
  }
  return { stopAt, total };
}

/**
 * Applies every record up to `stopAt` into `pool`'s schema with a materializer of its own
 * (consumer group `replayGroup`, no outbox), and waits for the markers still waiting for data.
 */
async function rebuild(
  pool: Pool,
  replayGroup: string,
  stopAt: ReadonlyMap<string, bigint>,
  options: ReplayOptions,
  deps: ReplayDeps,
): Promise<void> {
  const { logger } = deps;
  const materializer = new Materializer(
    {
      groupId: replayGroup,
      topicSuffix: options.topicSuffix,
      migrationsDir: options.migrationsDir,
      outbox: false,
      hourlyRetentionDays: options.hourlyRetentionDays,
      stopAt,
    },
    { kafka: deps.kafka, serde: deps.serde, pool, logger, ...(deps.metrics ? { metrics: deps.metrics } : {}) },
  );
  await materializer.start();
  try {
    await untilCaughtUp(pool, replayGroup, stopAt, logger);
    // Every record is in; the derive path applies the markers still waiting for their data.
    await materializer.settle();
  } finally {
    await materializer.stop();
  }
}

/** Renames the rebuilt schema over the live one in one transaction, the live one kept as `<schema>_previous`. */
async function swapSchemas(lock: PoolClient, schema: string, target: string): Promise<void> {
  const live = ident(schema);
  const previous = ident(`${schema}_previous`);
  const exists = await lock.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  await lock.query('BEGIN');
  await lock.query(`DROP SCHEMA IF EXISTS ${previous} CASCADE`);
  if (exists.rowCount) await lock.query(`ALTER SCHEMA ${live} RENAME TO ${previous}`);
  await lock.query(`ALTER SCHEMA ${ident(target)} RENAME TO ${live}`);
  await lock.query('COMMIT');
}

/** Waits until every partition's stored offset reached the captured end. */
async function untilCaughtUp(
  pool: ReturnType<typeof createPool>,
  groupId: string,
  stopAt: ReadonlyMap<string, bigint>,
  logger: Logger,
): Promise<void> {
  let lastLog = Date.now();
  for (;;) {
    const { rows } = await pool.query<{ topic: string; partition: number; next_offset: string }>(
      'SELECT topic, partition, next_offset FROM consumer_offsets WHERE group_id = $1',
      [groupId],
    );
    const at = new Map(rows.map((r) => [`${r.topic}:${r.partition}`, BigInt(r.next_offset)]));
    let behind = 0n;
    for (const [key, end] of stopAt) {
      const pos = at.get(key) ?? 0n;
      if (pos < end) behind += end - pos;
    }
    if (behind === 0n) return;
    if (Date.now() - lastLog > 5_000) {
      logger.info({ behind: behind.toString() }, 'replaying');
      lastLog = Date.now();
    }
    await sleep(100);
  }
}

async function deleteGroup(kafka: Kafka, groupId: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteGroups([groupId]);
  } catch {
    // Tidy-up only: a group Kafka still sees as active expires by itself.
  } finally {
    await admin.disconnect();
  }
}
