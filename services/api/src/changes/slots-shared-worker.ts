/**
 * Test fixture for slots-shared.test.ts: run as a node:cluster worker's main (the test forks two),
 * it takes stream slots through a SharedStreamSlots when the primary asks, and answers with what it
 * got: real processes, a real IPC channel, one primary counting.
 */
import cluster from 'node:cluster';
import { pathToFileURL } from 'node:url';
import { SharedStreamSlots } from './slots-shared.js';
import type { StreamSlotCounter } from './waker.js';

/** `n` takes for `keyId` at once; what each got. */
export const takeMany = (slots: StreamSlotCounter, keyId: string, limit: number, n: number): Promise<boolean[]> =>
  Promise.all(Array.from({ length: n }, () => slots.take(keyId, limit)));

/** As a cluster worker: takes what the primary asks for, answers with the outcomes. */
function serveTakes(): void {
  const slots = new SharedStreamSlots();
  const send = (m: object) => process.send?.(m);
  process.on('message', (m: { type?: string; keyId?: string; limit?: number; n?: number }) => {
    if (m.type !== 'test:take' || m.keyId === undefined) return;
    takeMany(slots, m.keyId, m.limit ?? 0, m.n ?? 1).then(
      (took) => send({ type: 'test:took', took }),
      (err: unknown) => send({ type: 'test:took', error: String(err) }),
    );
  });
  send({ type: 'test:ready' });
}

if (cluster.isWorker && process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) serveTakes();
