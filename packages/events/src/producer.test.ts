import type { RecordMetadata } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { chunkBySize, MAX_REQUEST_BYTES, unacknowledged } from './kafka.js';
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

describe('EventProducer: requests the broker accepts', () => {
  // Root cause guarded: one send of a whole catalogue (EU-A at 35k names: 30,290 records) went in
  // one request, kafkajs made each partition's share one record batch over the broker's 1 MiB
  // message.max.bytes, and every cycle of that marketplace failed.
  const msg = (i: number, bytes: number) => ({ key: Buffer.from(`k${i}`), value: Buffer.alloc(bytes) });
  it('splits a large send into consecutive chunks under the byte bound, in order, losing nothing', () => {
    const messages = Array.from({ length: 30_290 }, (_, i) => msg(i, 160 + (i % 90)));
    const chunks = chunkBySize(messages, MAX_REQUEST_BYTES);
    expect(chunks.length).toBeGreaterThan(10);
    for (const c of chunks)
      expect(c.reduce((n, m) => n + m.key.length + m.value.length, 0)).toBeLessThanOrEqual(MAX_REQUEST_BYTES);
    expect(chunks.flat()).toEqual(messages);
  });
  it('keeps a small send whole and a single oversized record on its own', () => {
    const small = [msg(1, 10), msg(2, 10)];
    expect(chunkBySize(small, MAX_REQUEST_BYTES)).toEqual([small]);
    const big = msg(3, MAX_REQUEST_BYTES + 1);
    expect(chunkBySize([small[0]!, big, small[1]!], MAX_REQUEST_BYTES)).toEqual([[small[0]], [big], [small[1]]]);
    expect(chunkBySize([], MAX_REQUEST_BYTES)).toEqual([]);
  });
});
