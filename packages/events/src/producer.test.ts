import type { RecordMetadata } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { unacknowledged } from './kafka.js';
import { partitionOfKey } from './partitioner.js';

const rec = (k: string) => ({ key: Buffer.from(k), value: Buffer.from('v') });
const ok = (partition: number): RecordMetadata => ({ topicName: 't', partition, errorCode: 0 });

describe('EventProducer: every partition acknowledged', () => {
  // Root cause guarded: kafkajs tracks a send per broker; when a broker died mid-send its
  // partitions moved to a broker that had already answered, the retry sent nothing, and send()
  // resolved without those records (make chaos lost hundreds of sales per broker kill).
  it('finds the records of partitions no successful response names, with their partition set', () => {
    const records = Array.from({ length: 60 }, (_, i) => rec(`["usd-1","item ${i}",""]`));
    const partitions = new Set(records.map((r) => partitionOfKey(r.key, 6)));
    expect(partitions.size).toBeGreaterThan(2);
    const [lost, ...answered] = [...partitions];
    const missing = unacknowledged(records, answered.map(ok), 6);
    expect(missing.length).toBe(records.filter((r) => partitionOfKey(r.key, 6) === lost).length);
    expect(missing.every((r) => r.partition === lost)).toBe(true);
    expect(unacknowledged(records, [...partitions].map(ok), 6)).toEqual([]);
  });

  it('a partition answered with an error code is not acknowledged', () => {
    const r = rec('k');
    const p = partitionOfKey(r.key, 3);
    expect(unacknowledged([r], [{ topicName: 't', partition: p, errorCode: 6 }], 3)).toEqual([{ ...r, partition: p }]);
  });
});
