import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ShutdownManager } from './shutdown.js';

describe('ShutdownManager', () => {
  it('stops in reverse order of registration, once', async () => {
    const order: string[] = [];
    const m = new ShutdownManager(pino({ level: 'silent' }));
    m.register('pool', async () => void order.push('pool'));
    m.register('http', async () => void order.push('http'));
    await Promise.all([m.shutdown(), m.shutdown()]);
    expect(order).toEqual(['http', 'pool']);
  });
  it('gives up on a handler that hangs past the deadline', async () => {
    const m = new ShutdownManager(pino({ level: 'silent' }), 50);
    m.register('stuck', () => new Promise(() => undefined));
    await expect(m.shutdown()).rejects.toThrow(/incomplete/);
  });
});
