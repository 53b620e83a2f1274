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
  it('logs how long each step took, so a slow stop names the step that held it', async () => {
    const lines: { handler?: string; ms?: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as never) });
    const m = new ShutdownManager(logger);
    m.register('pool', async () => undefined);
    m.register('http', () => new Promise((r) => setTimeout(r, 60)));
    await m.shutdown();
    const stopped = lines.filter((l) => l.msg === 'stopped');
    expect(stopped.map((l) => l.handler)).toEqual(['http', 'pool']);
    expect(stopped[0]?.ms).toBeGreaterThanOrEqual(50);
    expect(stopped[1]?.ms).toBeLessThan(50);
  });
  it('gives up on a handler that hangs past the deadline', async () => {
    const m = new ShutdownManager(pino({ level: 'silent' }), 50);
    m.register('stuck', () => new Promise(() => undefined));
    await expect(m.shutdown()).rejects.toThrow(/incomplete/);
  });
});
