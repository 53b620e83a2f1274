/**
 * The notifier's delivery paths that the chaos scenario does not walk, in-process against the
 * real Kafka, registry and PostgreSQL, every message checked with the third-party
 * `standardwebhooks` package:
 * - batching: a subscription asking for batches gets `price.changed.batch` messages of at most
 *   `max_events` changes, every change in exactly one of them;
 * - the address check at connect time: a subscription whose host resolves to a private address (stored
 *   past the API's check, as a DNS answer that changed since would be) is refused when connecting,
 *   and no request reaches the receiver;
 * - a secret rotation's overlap: a receiver that holds only the previous secret still verifies.
 */
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { Notifier } from '@skinprices/notifier';
import { createLogger } from '@skinprices/runtime';
import { createPool, type Pool } from '@skinprices/store';
import { generateSecret, isPublicAddress, SecretBox } from '@skinprices/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { projectTopics } from '../support/pipeline.js';
import { TestStack, uniqueName } from '../support/stack.js';
import {
  change,
  hookWorld,
  keyOf,
  produceChanges,
  Receiver,
  subscribe,
  type HookWorld,
  type PriceChange,
} from '../../reliability/support/webhooks.js';

describe('webhook deliveries: batches, the connect-time address check, a rotation', () => {
  const stack = new TestStack();
  let world: HookWorld;
  let notifier: Notifier;
  let pool: Pool;
  let observed = Date.now() - 3_600_000;
  const changes = (n: number, market = 'cn-a'): PriceChange[] =>
    Array.from({ length: n }, (_, i) => change(market, `Delivery Item ${i}`, '20.00', '18.00', observed++));

  beforeAll(async () => {
    world = await hookWorld(stack, await projectTopics(stack));
    pool = createPool({ databaseUrl: stack.env.databaseUrl, schema: world.webhooksSchema, max: 8 });
    stack.defer(() => pool.end());
  });

  /** A notifier on this world; `allowPrivate` false is production's address policy. */
  async function startNotifier(allowPrivate: boolean): Promise<void> {
    const started = new Notifier(
      {
        groupId: uniqueName('notifier'),
        topicSuffix: world.suffix,
        webhooksSchema: world.webhooksSchema,
        keysSchema: world.keysSchema,
        secretKeys: world.ring,
        allowPrivateUrls: allowPrivate,
        deliveryTimeoutMs: 3_000,
        subscriptionsRefreshMs: 500,
      },
      { pool, kafka: stack.kafka, serde: stack.serde, logger: createLogger('notifier', 'silent') },
    );
    await started.start();
    notifier = started;
    stack.defer(async () => {
      if (started.state !== 'stopped') await started.stop();
    });
  }

  afterAll(() => stack.cleanup());

  it('batches of at most max_events changes, every change in exactly one, each signed', async () => {
    await startNotifier(true);
    const receiver = new Receiver();
    await receiver.start();
    stack.defer(() => receiver.stop());
    const { secret } = await subscribe(world, receiver.url, { markets: ['eu-a'] }, { max: 5, windowMs: 300 });
    receiver.addSecret(secret);
    const sent = changes(12, 'eu-a');
    await produceChanges(world, [...sent, ...changes(3, 'cn-b')]);
    await eventually(
      'every change in a batch',
      async () => (receiver.accepted().flatMap((a) => a.changes).length >= 12 ? true : undefined),
      30_000,
    );
    const batches = receiver.accepted();
    expect(receiver.badSignatures).toBe(0);
    expect(batches.every((b) => b.type === 'price.changed.batch' && b.changes.length <= 5)).toBe(true);
    expect(batches.flatMap((b) => b.changes).sort()).toEqual(sent.map(keyOf).sort());
    expect(new Set(batches.map((b) => b.id)).size).toBe(batches.length);
  });

  it('refuses at connect time a host that resolves to a private address; nothing reaches it', async () => {
    await notifier.stop();
    await startNotifier(false);
    const receiver = new Receiver();
    await receiver.start();
    stack.defer(() => receiver.stop());
    // A name the URL check cannot judge by itself ('localhost' it refuses before connecting):
    // this machine's own, which /etc/hosts resolves to a loopback or private address. As if a
    // customer's name had resolved to a public address when the API checked it, and not now.
    const host = hostname();
    const { address } = await lookup(host);
    expect(isPublicAddress(address), `${host} resolves to ${address}`).toBe(false);
    const { id, secret } = await subscribe(world, `http://${host}:${receiver.port}/hook`, { markets: ['usd-2'] });
    receiver.addSecret(secret);
    await produceChanges(world, changes(2, 'usd-2'));
    const rows = await eventually(
      'both deliveries failed',
      async () => {
        const { rows } = await pool.query<{ status: string; last_error: string | null; attempts: number }>(
          `SELECT status, last_error, attempts FROM webhook_messages WHERE subscription_id = $1`,
          [id],
        );
        return rows.length === 2 && rows.every((r) => r.status === 'failed') ? rows : undefined;
      },
      30_000,
    );
    for (const r of rows) expect(r.last_error).toMatch(new RegExp(`^address refused: ${host} resolves to `));
    expect(rows.every((r) => r.attempts === 1)).toBe(true);
    expect(receiver.arrivals).toEqual([]);
  });

  it('signs with both secrets during a rotation: a receiver holding only the previous one verifies', async () => {
    const receiver = new Receiver();
    await receiver.start();
    stack.defer(() => receiver.stop());
    await notifier.stop();
    await startNotifier(true);
    const { id, secret: previous } = await subscribe(world, receiver.url, { markets: ['eu-b'] });
    const current = generateSecret();
    const box = new SecretBox(world.ring);
    await pool.query(
      `UPDATE webhook_subscriptions SET secret_sealed = $2, previous_secret_sealed = $3,
              previous_secret_until = now() + interval '1 day' WHERE id = $1`,
      [id, box.seal(current, id), box.seal(previous, id)],
    );
    await pool.query(`SELECT pg_notify('skinprices_webhooks', $1)`, [world.webhooksSchema]);
    await new Promise((r) => setTimeout(r, 1_000));
    receiver.addSecret(previous);
    await produceChanges(world, changes(1, 'eu-b'));
    await eventually('the change delivered', async () => (receiver.accepted().length === 1 ? true : undefined), 30_000);
    expect(receiver.badSignatures).toBe(0);
  });
});
