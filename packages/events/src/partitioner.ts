/**
 * Kafka's default partitioner (the Java client's: murmur2 of the key, made positive, modulo the
 * partition count; round robin without a key) with murmur2 in 32-bit integer arithmetic. kafkajs
 * computes the same hash through its 64-bit Long emulation, which was an eighth of the produce
 * path's CPU. Same partition for every key: the property test checks it against kafkajs's own.
 */
import type { ICustomPartitioner } from 'kafkajs';

const M = 0x5bd1e995;

/** Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit integer. */
export function murmur2(data: Buffer): number {
  const length = data.length;
  let h = (0x9747b28c ^ length) | 0;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i << 2;
    let k =
      (data[i4] as number) |
      ((data[i4 + 1] as number) << 8) |
      ((data[i4 + 2] as number) << 16) |
      ((data[i4 + 3] as number) << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  // The Java switch falls through 3 → 2 → 1; spelled out, as this project forbids fallthrough.
  const tail = length & ~3;
  const rest = length & 3;
  if (rest === 3) h ^= (data[tail + 2] as number) << 16;
  if (rest >= 2) h ^= (data[tail + 1] as number) << 8;
  if (rest >= 1) {
    h ^= data[tail] as number;
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

const toPositive = (x: number) => x & 0x7fffffff;

/** The partition a keyed record goes to among `numPartitions` (Kafka's default partitioner). */
export function partitionOfKey(key: Buffer, numPartitions: number): number {
  return toPositive(murmur2(key)) % numPartitions;
}

export const DefaultPartitioner: ICustomPartitioner = () => {
  const counters = new Map<string, number>();
  return ({ topic, partitionMetadata, message }) => {
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    const numPartitions = partitionMetadata.length;
    if (message.key !== null && message.key !== undefined) {
      const key = Buffer.isBuffer(message.key) ? message.key : Buffer.from(String(message.key));
      return toPositive(murmur2(key)) % numPartitions;
    }
    const n = (counters.get(topic) ?? Math.floor(Math.random() * 0x7fffffff)) + 1;
    counters.set(topic, n);
    const available = partitionMetadata.filter((p) => p.leader >= 0);
    if (available.length > 0)
      return (available[toPositive(n) % available.length] as { partitionId: number }).partitionId;
    return toPositive(n) % numPartitions;
  };
};
