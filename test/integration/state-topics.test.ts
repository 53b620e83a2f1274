/**
 * The state topics (float buckets, float orders, books) keep 7 days: a consumer away longer, or a
 * replay after their records expired, must still end with the right state. A FULL cycle deletes
 * what it did not see even when its removals came as records, and a partition whose records
 * expired unread starts at its log's start, with its cycles' markers applied.
 */
import { topicFor } from '@skinprices/events';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const MARKET = 'cn-c';

describe('state topics past their retention', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let poller: Poller;

  const cycle = async () => {
    const { marker } = await poller.runOnce('FLOAT_RANGED');
    await untilApplied(pool, marker.cycle_id);
    return marker;
  };
  const buckets = async (db: Pool) =>
    (
      await db.query<{ k: string }>(
        `SELECT market_hash_name || '/' || phase || '/' || float_min || '/' || coalesce(first_price::text, '-') || '/' || count AS k
         FROM float_ranged_current WHERE market = $1 ORDER BY 1`,
        [MARKET],
      )
    ).rows.map((r) => r.k);

  beforeAll(async () => {
    sim = await startSimulator(stack, 100);
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    // Every cycle FULL: the first removes what it did not see the old way; from the second on,
    // removals come as records (removals_sent).
    poller = (await startPoller(stack, sim, MARKET, suffix, { fullEvery: 1 })).poller;
  }, 60_000);
  afterAll(() => stack.cleanup());

  it('a FULL cycle deletes a row whose removal record never arrived, removals sent or not', async () => {
    await cycle();
    await sim.control('POST', '/_sim/clock', { advanceMs: 5 * 60_000 });
    await cycle();
    const truth = await buckets(pool);
    expect(truth.length).toBeGreaterThan(50);
    // A bucket the read model kept because its removal expired before it was read.
    await pool.query(
      `INSERT INTO float_ranged_current
       SELECT market, market_hash_name || ' (gone)', phase, float_min, float_max, currency, first_price, fifth_price,
              count, phase_labels, observed_at - interval '1 day', cycle_id
       FROM float_ranged_current WHERE market = $1 LIMIT 1`,
      [MARKET],
    );
    expect((await buckets(pool)).length).toBe(truth.length + 1);
    const marker = await cycle();
    expect(marker).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE', removals_sent: true });
    expect(await buckets(pool)).toEqual(truth);
  });

  it('a consumer whose records expired starts at the log start and applies those cycles markers', async () => {
    const topic = `${topicFor('floatRanged').name}${suffix}`;
    const admin = stack.kafka.admin();
    await admin.connect();
    stack.defer(() => admin.disconnect());
    const before = await admin.fetchTopicOffsets(topic);
    // Retention, all at once: every record of the topic gone.
    await admin.deleteTopicRecords({
      topic,
      partitions: before.map((p) => ({ partition: p.partition, offset: '-1' })),
    });
    const after = await admin.fetchTopicOffsets(topic);
    expect(after.every((p) => p.low === p.high)).toBe(true);
    expect(after.some((p) => Number(p.low) > 0)).toBe(true);

    const { pool: fresh } = await stack.schema();
    const groupId = stack.groupId();
    await startMaterializer(stack, suffix, fresh, { groupId });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { rows } = await fresh
        .query<{ n: number }>(
          `SELECT count(*)::int AS n FROM poll_cycles WHERE kind = 'FLOAT_RANGED' AND applied_at IS NOT NULL`,
        )
        .catch(() => ({ rows: [{ n: 0 }] }));
      if (rows[0]?.n === 3) break;
      if (Date.now() > deadline) throw new Error(`${rows[0]?.n ?? 0} of 3 FLOAT_RANGED markers applied`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const { rows: stored } = await fresh.query<{ partition: number; next_offset: string }>(
      'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 ORDER BY partition',
      [groupId, topic],
    );
    expect(stored).toEqual(
      after
        .filter((p) => Number(p.low) > 0)
        .sort((a, b) => a.partition - b.partition)
        .map((p) => ({ partition: p.partition, next_offset: p.low })),
    );
    // Nothing of the expired state is invented: the buckets come back with the next FULL cycle.
    expect(await buckets(fresh)).toEqual([]);
  });
});
