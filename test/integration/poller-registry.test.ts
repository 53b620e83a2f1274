/**
 * A poller whose schema registry was away recovers by itself: the registration that failed is
 * asked again by the next cycle, not kept as a failure until the process restarts.
 */
import type { EventSerde } from '@skinprices/events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics, startPoller, startSimulator, type Sim } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

/** The serde, with its first registration of a listings topic refused as a registry that is away. */
function awayOnce(serde: EventSerde): EventSerde {
  let refused = false;
  return new Proxy(serde, {
    get(target, prop, receiver) {
      if (prop === 'codec')
        return (topic: string, kind: Parameters<EventSerde['codec']>[1]) => {
          if (!refused && topic.startsWith('listings.v1')) {
            refused = true;
            return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:8081'));
          }
          return target.codec(topic, kind);
        };
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('a poller while the schema registry is away', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;

  beforeAll(async () => {
    sim = await startSimulator(stack, 50);
    suffix = await projectTopics(stack);
  }, 60_000);
  afterAll(() => stack.cleanup());

  it('fails the cycle it cannot encode, then completes the next one', async () => {
    const { poller } = await startPoller(stack, sim, 'eu-a', suffix, { wrapSerde: awayOnce });
    const first = await poller.runOnce('LISTINGS').then(
      (r) => r.marker.outcome,
      () => 'THREW',
    );
    expect(first).not.toBe('COMPLETE');
    const second = await poller.runOnce('LISTINGS');
    expect(second.marker).toMatchObject({ outcome: 'COMPLETE', error: null });
  }, 60_000);
});
