/**
 * The webhook management API against the real PostgreSQL: plans and ACLs, subscriptions per key
 * (another key's are not found), the secret shown once and sealed at rest, URL and filter
 * refusals naming the field, the plan's subscription limit under concurrent creates, rotation,
 * enabling (queued deliveries start their retries over), test deliveries, the delivery log and
 * retries, the daily delivery limit on tests and retries and the key's usage, NOTIFY on every
 * write (subscription changes and due messages on channels of their own), and the 503s of a
 * server without webhooks configured, without their schema, or with their database unreachable,
 * misconfigured or read-only. The webhooks schema is migrated here as the notifier does at its start.
 */
import { WEBHOOKS_API_CONTRACT, type Plan } from '@skinprices/api';
import { contractDrift, contractTypeName, migrate, type Pool } from '@skinprices/store';
import {
  SecretBox,
  WEBHOOK_DUE_CHANNEL,
  WEBHOOK_LIMITS,
  WEBHOOKS_CHANNEL,
  WEBHOOKS_MIGRATIONS_DIR,
} from '@skinprices/webhooks';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi } from '../support/api.js';
import { checkContract } from '../support/openapi-contract.js';
import { TestStack, uniqueName } from '../support/stack.js';

const RING = `k1:${SecretBox.generateKey()}`;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const URL_OK = 'https://hooks.example.com/skinprices';
const STANDBY_URL = process.env.STANDBY_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5443/skinprices';
/** Today in UTC, as the usage's `day`. */
const utcDay = () => new Date().toISOString().slice(0, 10);
const secondsToUtcMidnight = () => {
  const now = new Date();
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
};

describe('webhook management API', () => {
  const stack = new TestStack();
  let app: FastifyInstance;
  let hooks: { name: string; pool: Pool };
  const k: Record<Plan | 'pro2' | 'limited' | 'acl' | 'aclOk' | 'daily', string> = {
    basic: '',
    pro: '',
    enterprise: '',
    pro2: '',
    limited: '',
    acl: '',
    aclOk: '',
    daily: '',
  };
  /** api_keys.id of k.daily, the key whose day's usage is set by hand. */
  let dailyKeyId = '';
  let listener: pg.Client;
  const notified: { channel: string; payload: string }[] = [];

  beforeAll(async () => {
    const read = await stack.schema();
    hooks = await stack.schema();
    await migrate(hooks.pool, WEBHOOKS_MIGRATIONS_DIR);
    const api = await startApi(stack, read.pool, {
      plans: ['basic'],
      deps: {
        webhooks: { databaseUrl: stack.env.databaseUrl, schema: hooks.name, secretKeys: RING, allowPrivateUrls: false },
      },
    });
    app = api.app;
    k.basic = api.keys.basic;
    // Many requests a second, as a customer's automation makes them; the rate limit is not what is tested.
    const make = async (plan: Plan, extra = {}, customer = `${plan}@other.example`) =>
      (await api.store.create({ customer, plan, perSecond: 10_000, ...extra })).secret;
    k.pro = await make('pro', {}, 'pro@test.example');
    k.enterprise = await make('enterprise', {}, 'enterprise@test.example');
    k.pro2 = await make('pro');
    k.limited = await make('pro');
    k.acl = await make('enterprise', { allowedEndpoints: ['GET /v1/prices/latest'] });
    k.aclOk = await make('enterprise', { allowedEndpoints: ['GET /v1/webhooks'] });
    const daily = await api.store.create({ customer: 'daily@test.example', plan: 'pro', perSecond: 10_000 });
    k.daily = daily.secret;
    dailyKeyId = daily.key.id;
    listener = new pg.Client({ connectionString: stack.env.databaseUrl });
    await listener.connect();
    listener.on('notification', (n) => notified.push({ channel: n.channel, payload: n.payload ?? '' }));
    await listener.query(`LISTEN ${WEBHOOKS_CHANNEL}`);
    await listener.query(`LISTEN ${WEBHOOK_DUE_CHANNEL}`);
    stack.defer(() => listener.end());
  });
  afterAll(() => stack.cleanup());

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string, payload?: Record<string, unknown>) =>
    app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload === undefined ? {} : { payload }) });
  const create = (key: string, body: Record<string, unknown> = {}) =>
    call('POST', '/v1/webhooks', key, { url: URL_OK, ...body });
  const sealedOf = async (id: string) =>
    (
      await hooks.pool.query<{ secret_sealed: string; previous_secret_sealed: string | null }>(
        'SELECT secret_sealed, previous_secret_sealed FROM webhook_subscriptions WHERE id = $1',
        [id],
      )
    ).rows[0]!;
  /** The channels notified for this test's schema so far. */
  const channels = () => notified.filter((n) => n.payload === hooks.name).map((n) => n.channel);
  const setUsage = (messages: number, dropped = 0) =>
    hooks.pool.query(
      `INSERT INTO webhook_daily_usage (key_id, day, messages, dropped) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, $3)
       ON CONFLICT (key_id, day) DO UPDATE SET messages = excluded.messages, dropped = excluded.dropped`,
      [dailyKeyId, messages, dropped],
    );
  const usedToday = async () =>
    (
      await hooks.pool.query<{ messages: number }>(
        `SELECT messages FROM webhook_daily_usage WHERE key_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`,
        [dailyKeyId],
      )
    ).rows[0]?.messages ?? 0;

  it('the queries rely on the migrated tables exactly as the contract describes them', async () => {
    const { rows } = await hooks.pool.query<{ table: string; column: string; type: string }>(
      `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname = ANY($2) ORDER BY c.relname, a.attnum`,
      [hooks.name, Object.keys(WEBHOOKS_API_CONTRACT)],
    );
    const tables: Record<string, Record<string, string>> = {};
    for (const r of rows) (tables[r.table] ??= {})[r.column] = contractTypeName(r.type);
    expect(contractDrift(tables, WEBHOOKS_API_CONTRACT)).toEqual([]);
  });

  it('needs pro: basic gets 403 plan_required; an ACL without the endpoint 403 endpoint_not_allowed', async () => {
    const basic = await create(k.basic);
    expect(basic.statusCode).toBe(403);
    expect(basic.json()).toEqual({ error: { status: 403, code: 'plan_required', message: expect.any(String) } });
    expect((await call('GET', '/v1/webhooks', k.basic)).statusCode).toBe(403);
    const acl = await call('GET', '/v1/webhooks', k.acl);
    expect(acl.statusCode).toBe(403);
    expect(acl.json().error.code).toBe('endpoint_not_allowed');
    expect((await call('GET', '/v1/webhooks', k.aclOk)).statusCode).toBe(200);
    expect((await create(k.aclOk)).json().error.code).toBe('endpoint_not_allowed');
  });

  it('creates: 201 with the secret once, sealed at rest; GET, list and delete; NOTIFY on each write', async () => {
    notified.length = 0;
    const res = await create(k.pro, {
      description: 'my bot',
      filters: { markets: ['cn-a'], min_change_pct: '5', include_count_changes: false },
      batch: { max_events: 10, window_ms: 2000 },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers.vary).toMatch(/x-api-key/);
    const body = res.json();
    expect(body).toEqual({
      data: {
        id: expect.stringMatching(/^wh_[a-z2-7]{26}$/),
        url: URL_OK,
        description: 'my bot',
        filters: { markets: ['cn-a'], min_change_pct: '5', include_count_changes: false },
        batch: { max_events: 10, window_ms: 2000 },
        status: 'active',
        disabled_reason: null,
        disabled_at: null,
        failing_since: null,
        created_at: expect.stringMatching(TIME),
        updated_at: expect.stringMatching(TIME),
        secret_rotated_until: null,
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      },
      requestor: 'pro@test.example',
      plan: 'pro',
      timestamp: expect.stringMatching(TIME),
    });
    const { id, secret } = body.data;
    const sealed = await sealedOf(id);
    expect(sealed.secret_sealed).not.toContain(secret.slice(6));
    expect(new SecretBox(RING).open(sealed.secret_sealed, id)).toBe(secret);

    const one = await call('GET', `/v1/webhooks/${id}`, k.pro);
    expect(one.statusCode).toBe(200);
    expect(one.json().data).toEqual({ ...body.data, secret: undefined });
    expect(one.json().data).not.toHaveProperty('secret');
    expect(one.headers['cache-control']).toBe('no-store');
    const list = await call('GET', '/v1/webhooks', k.pro);
    expect(list.json().data.map((s: { id: string }) => s.id)).toContain(id);
    expect(JSON.stringify(list.json())).not.toContain('whsec_');

    // Defaults: no filters, one change per delivery.
    const plain = (await create(k.pro)).json().data;
    expect(plain).toMatchObject({ filters: {}, batch: { max_events: 1, window_ms: 0 }, description: '' });

    const del = await call('DELETE', `/v1/webhooks/${id}`, k.pro);
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await call('GET', `/v1/webhooks/${id}`, k.pro)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/webhooks/${id}`, k.pro)).statusCode).toBe(404);
    await call('DELETE', `/v1/webhooks/${plain.id}`, k.pro);
    await expect.poll(() => notified.length).toBeGreaterThanOrEqual(4);
    expect(new Set(notified.map((n) => n.payload))).toEqual(new Set([hooks.name]));
    expect(new Set(channels())).toEqual(new Set([WEBHOOKS_CHANNEL]));
  });

  it('notifies subscription changes on skinprices_webhooks, and messages made due on skinprices_webhook_due only', async () => {
    notified.length = 0;
    const { id } = (await create(k.enterprise)).json().data;
    await call('POST', `/v1/webhooks/${id}/rotate-secret`, k.enterprise);
    await expect.poll(channels).toEqual([WEBHOOKS_CHANNEL, WEBHOOKS_CHANNEL]);
    // A test or retry wakes the dispatchers without making every notifier reload every subscription.
    notified.length = 0;
    const messageId = (await call('POST', `/v1/webhooks/${id}/test`, k.enterprise)).json().data.message_id;
    await hooks.pool.query(`UPDATE webhook_messages SET status = 'failed' WHERE id = $1`, [messageId]);
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/${messageId}/retry`, k.enterprise)).statusCode).toBe(202);
    await expect.poll(channels).toEqual([WEBHOOK_DUE_CHANNEL, WEBHOOK_DUE_CHANNEL]);
    // Enabling changes the subscription and makes its queued messages due: both.
    notified.length = 0;
    await call('POST', `/v1/webhooks/${id}/enable`, k.enterprise);
    await expect.poll(channels).toEqual([WEBHOOKS_CHANNEL, WEBHOOK_DUE_CHANNEL]);
    // What changes nothing (another key's, a missing one) notifies nothing.
    notified.length = 0;
    await call('POST', `/v1/webhooks/${id}/test`, k.pro2);
    await call('POST', `/v1/webhooks/${id}/enable`, k.pro2);
    await call('DELETE', `/v1/webhooks/${id}`, k.enterprise);
    await expect.poll(channels).toEqual([WEBHOOKS_CHANNEL]);
  });

  it("another key's subscription does not exist for this one: 404 on every operation", async () => {
    const { id } = (await create(k.pro)).json().data;
    const other = [
      call('GET', `/v1/webhooks/${id}`, k.pro2),
      call('DELETE', `/v1/webhooks/${id}`, k.pro2),
      call('POST', `/v1/webhooks/${id}/rotate-secret`, k.pro2),
      call('POST', `/v1/webhooks/${id}/enable`, k.pro2),
      call('POST', `/v1/webhooks/${id}/test`, k.pro2),
      call('GET', `/v1/webhooks/${id}/deliveries`, k.pro2),
      call('POST', `/v1/webhooks/${id}/deliveries/msg_x/retry`, k.pro2),
    ];
    for (const res of await Promise.all(other)) {
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
    expect((await call('GET', '/v1/webhooks', k.pro2)).json().data).toEqual([]);
    expect((await call('GET', `/v1/webhooks/${id}`, k.pro)).statusCode).toBe(200);
    await call('DELETE', `/v1/webhooks/${id}`, k.pro);
  });

  it('refuses bad URLs, filters and bodies with 400 naming the field', async () => {
    const refused = async (body: Record<string, unknown>, field: string, headers: Record<string, string> = {}) => {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: { 'x-api-key': k.pro, ...headers },
        payload: body,
      });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.code).toBe('bad_parameter');
      expect(res.json().error.message, JSON.stringify(body)).toMatch(new RegExp(`^${field.replaceAll('.', '\\.')}: `));
    };
    await refused({ url: 'ftp://hooks.example.com/x' }, 'url');
    await refused({ url: 'http://127.0.0.1:8080/x' }, 'url');
    await refused({ url: 'http://localhost/x' }, 'url');
    await refused({ url: 'http://10.1.2.3/x' }, 'url');
    await refused({ url: 'https://user:pw@hooks.example.com/x' }, 'url');
    await refused({ url: 'not a url' }, 'url');
    await refused({}, 'url');
    await refused({ url: URL_OK, filters: { min_change_pct: '-5' } }, 'filters.min_change_pct');
    await refused({ url: URL_OK, filters: { min_change_pct: '0' } }, 'filters.min_change_pct');
    await refused({ url: URL_OK, filters: { markets: ['nowhere'] } }, 'filters.markets.0');
    await refused(
      { url: URL_OK, filters: { crosses: { price: '10', direction: 'sideways' } } },
      'filters.crosses.direction',
    );
    await refused({ url: URL_OK, filters: { items: [{ market_hash_name: '' }] } }, 'filters.items.0.market_hash_name');
    await refused({ url: URL_OK, filters: { min_change_percent: '5' } }, 'filters.min_change_percent');
    await refused({ url: URL_OK, batch: { max_events: 101 } }, 'batch.max_events');
    await refused({ url: URL_OK, batch: { max_events: 2, window_ms: 60_001 } }, 'batch.window_ms');
    await refused({ url: URL_OK, secret: 'whsec_mine' }, 'secret');
    const text = await app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: { 'x-api-key': k.pro, 'content-type': 'text/plain' },
      payload: JSON.stringify({ url: URL_OK }),
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().error.code).toBe('unsupported_media_type');
    const large = await create(k.pro, { description: 'x'.repeat(70_000) });
    expect(large.statusCode).toBe(413);
    expect((await call('GET', '/v1/webhooks', k.pro)).json().data).toEqual([]);
  });

  it('a pro key has 10 subscriptions at most, even when created at once: the 11th is 403 webhook_limit', async () => {
    const secret = k.limited;
    const answers = await Promise.all(Array.from({ length: 14 }, () => create(secret)));
    expect(answers.filter((a) => a.statusCode === 201)).toHaveLength(10);
    const over = answers.filter((a) => a.statusCode === 403);
    expect(over).toHaveLength(4);
    expect(over[0]!.json().error).toMatchObject({ status: 403, code: 'webhook_limit' });
    expect((await call('GET', '/v1/webhooks', secret)).json().data).toHaveLength(10);
    // Deleting one makes room again.
    const first = answers.find((a) => a.statusCode === 201)!.json().data.id as string;
    expect((await call('DELETE', `/v1/webhooks/${first}`, secret)).statusCode).toBe(204);
    expect((await create(secret)).statusCode).toBe(201);
  });

  it('rotate-secret: a new secret, the previous one kept sealed and signing for 24 h', async () => {
    const made = (await create(k.enterprise)).json().data;
    const before = await sealedOf(made.id);
    const res = await call('POST', `/v1/webhooks/${made.id}/rotate-secret`, k.enterprise);
    expect(res.statusCode, res.body).toBe(200);
    const { secret, previous_valid_until } = res.json().data;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(made.secret);
    const hours = (Date.parse(previous_valid_until) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
    const after = await sealedOf(made.id);
    expect(after.previous_secret_sealed).toBe(before.secret_sealed);
    const box = new SecretBox(RING);
    expect(box.open(after.secret_sealed, made.id)).toBe(secret);
    expect(box.open(after.previous_secret_sealed!, made.id)).toBe(made.secret);
    const got = (await call('GET', `/v1/webhooks/${made.id}`, k.enterprise)).json().data;
    expect(got.secret_rotated_until).toBe(previous_valid_until);
    expect(got).not.toHaveProperty('secret');
  });

  it('enable: a disabled subscription is active again, its failure clock and pause reset, its queued deliveries due with fresh retries', async () => {
    const { id } = (await create(k.enterprise)).json().data;
    await hooks.pool.query(
      `UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = 'every delivery failed for 24 h; last: 500',
         disabled_at = now(), failing_since = now() - interval '25 hours', paused_until = now() + interval '1 hour' WHERE id = $1`,
      [id],
    );
    // Queued while it failed: their 24 hours of retries are over, the last one waiting for a backoff.
    await hooks.pool.query(
      `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, attempts, first_attempt_at,
         next_attempt_at, committed_at, last_attempt_at, last_status_code)
       VALUES ('msg_en1', $1, 'price.changed', '{}', 1, 'pending', 30, now() - interval '25 hours', now() + interval '40 minutes',
               now() - interval '26 hours', now() - interval '20 minutes', 500),
              ('msg_en2', $1, 'price.changed', '{}', 1, 'pending', 0, NULL, now() + interval '1 minute', now(), NULL, NULL),
              ('msg_en3', $1, 'price.changed', '{}', 1, 'failed', 31, now() - interval '25 hours', now(), now() - interval '26 hours',
               now() - interval '1 hour', 500)`,
      [id],
    );
    expect((await call('GET', `/v1/webhooks/${id}`, k.enterprise)).json().data).toMatchObject({
      status: 'disabled',
      disabled_reason: expect.stringContaining('24 h'),
      disabled_at: expect.stringMatching(TIME),
    });
    const res = await call('POST', `/v1/webhooks/${id}/enable`, k.enterprise);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({
      status: 'active',
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
    });
    const { rows } = await hooks.pool.query(
      `SELECT id, status, attempts, first_attempt_at, next_attempt_at <= now() AS due FROM webhook_messages
       WHERE subscription_id = $1 ORDER BY id`,
      [id],
    );
    expect(rows).toEqual([
      { id: 'msg_en1', status: 'pending', attempts: 0, first_attempt_at: null, due: true },
      { id: 'msg_en2', status: 'pending', attempts: 0, first_attempt_at: null, due: true },
      // A finished one stays as it is (a retry sends it again).
      { id: 'msg_en3', status: 'failed', attempts: 31, first_attempt_at: expect.any(Date), due: true },
    ]);
    const paused = await hooks.pool.query('SELECT paused_until FROM webhook_subscriptions WHERE id = $1', [id]);
    expect(paused.rows[0].paused_until).toBeNull();
  });

  it('test delivery: 202 and a pending webhook.test message, due now', async () => {
    const { id } = (await create(k.enterprise)).json().data;
    const res = await call('POST', `/v1/webhooks/${id}/test`, k.enterprise);
    expect(res.statusCode, res.body).toBe(202);
    const messageId = res.json().data.message_id as string;
    expect(messageId).toMatch(/^msg_/);
    const { rows } = await hooks.pool.query(
      'SELECT subscription_id, type, status, event_count, body, next_attempt_at <= now() AS due FROM webhook_messages WHERE id = $1',
      [messageId],
    );
    expect(rows[0]).toMatchObject({
      subscription_id: id,
      type: 'webhook.test',
      status: 'pending',
      event_count: 1,
      due: true,
    });
    expect(JSON.parse(rows[0].body)).toMatchObject({ type: 'webhook.test', data: { subscription_id: id } });
  });

  it('deliveries: newest first, filtered by status, a page at a time with before; retry of a failed one', async () => {
    const { id } = (await create(k.enterprise)).json().data;
    // Twelve messages a second apart, every third failed.
    await hooks.pool.query(
      `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, attempts, first_attempt_at, committed_at,
         created_at, last_attempt_at, last_status_code, last_error)
       SELECT 'msg_t' || lpad(i::text, 2, '0'), $1, 'price.changed', '{}', 1,
              CASE WHEN i % 3 = 0 THEN 'failed' ELSE 'succeeded' END, 3, now() - interval '1 hour', now() - interval '1 hour',
              now() - interval '1 hour' + i * interval '1 second', now(),
              CASE WHEN i % 3 = 0 THEN 500 ELSE 200 END, CASE WHEN i % 3 = 0 THEN 'HTTP 500: oops' END
       FROM generate_series(1, 12) i`,
      [id],
    );
    const page = async (query: string) => {
      const res = await call('GET', `/v1/webhooks/${id}/deliveries${query}`, k.enterprise);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      return res.json();
    };
    const first = await page('?limit=5');
    expect(first.data.map((m: { id: string }) => m.id)).toEqual([
      'msg_t12',
      'msg_t11',
      'msg_t10',
      'msg_t09',
      'msg_t08',
    ]);
    expect(first).toMatchObject({ has_more: true, next_before: 'msg_t08', plan: 'enterprise' });
    expect(first.data[0]).toEqual({
      id: 'msg_t12',
      type: 'price.changed',
      status: 'failed',
      attempts: 3,
      event_count: 1,
      created_at: expect.stringMatching(TIME),
      committed_at: expect.stringMatching(TIME),
      next_attempt_at: null,
      last_attempt_at: expect.stringMatching(TIME),
      last_status_code: 500,
      last_error: 'HTTP 500: oops',
      delivered_at: null,
      latency_ms: null,
    });
    const second = await page('?limit=5&before=msg_t08');
    expect(second.data.map((m: { id: string }) => m.id)).toEqual([
      'msg_t07',
      'msg_t06',
      'msg_t05',
      'msg_t04',
      'msg_t03',
    ]);
    const last = await page('?limit=5&before=msg_t03');
    expect(last).toMatchObject({ has_more: false, next_before: null });
    expect(last.data.map((m: { id: string }) => m.id)).toEqual(['msg_t02', 'msg_t01']);
    const failed = await page('?status=failed');
    expect(failed.data.map((m: { id: string }) => m.id)).toEqual(['msg_t12', 'msg_t09', 'msg_t06', 'msg_t03']);
    const unknown = await call('GET', `/v1/webhooks/${id}/deliveries?before=msg_nope`, k.enterprise);
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.message).toMatch(/^before: /);
    expect((await call('GET', `/v1/webhooks/${id}/deliveries?limit=101`, k.enterprise)).statusCode).toBe(400);
    expect((await call('GET', `/v1/webhooks/${id}/deliveries?status=lost`, k.enterprise)).statusCode).toBe(400);
    // Past the daily limit a match is counted, never stored: no delivery is 'dropped'.
    expect((await call('GET', `/v1/webhooks/${id}/deliveries?status=dropped`, k.enterprise)).statusCode).toBe(400);

    notified.length = 0;
    const retry = await call('POST', `/v1/webhooks/${id}/deliveries/msg_t12/retry`, k.enterprise);
    expect(retry.statusCode, retry.body).toBe(202);
    expect(retry.json().data).toMatchObject({ id: 'msg_t12', status: 'pending', attempts: 0 });
    const { rows } = await hooks.pool.query(
      `SELECT status, attempts, first_attempt_at, next_attempt_at <= now() AS due FROM webhook_messages WHERE id = 'msg_t12'`,
    );
    // Its 24 hours of retries start over too.
    expect(rows[0]).toEqual({ status: 'pending', attempts: 0, first_attempt_at: null, due: true });
    await expect.poll(channels).toContain(WEBHOOK_DUE_CHANNEL);
    expect(channels()).not.toContain(WEBHOOKS_CHANNEL);
    // A message of another subscription (even of the same key) is not this one's.
    const other = (await create(k.enterprise)).json().data.id as string;
    expect((await call('POST', `/v1/webhooks/${other}/deliveries/msg_t11/retry`, k.enterprise)).statusCode).toBe(404);
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/msg_none/retry`, k.enterprise)).statusCode).toBe(404);
  });

  it("GET /v1/webhooks answers the key's usage of the UTC day beside its subscriptions", async () => {
    await setUsage(0);
    const before = (await call('GET', '/v1/webhooks', k.daily)).json();
    expect(before.usage).toEqual({ day: utcDay(), messages: 0, dropped: 0, limit: WEBHOOK_LIMITS.pro.messagesPerDay });
    const { id } = (await create(k.daily)).json().data;
    expect((await call('POST', `/v1/webhooks/${id}/test`, k.daily)).statusCode).toBe(202);
    // The notifier counts what it drops past the limit in the same row.
    await hooks.pool.query(
      `UPDATE webhook_daily_usage SET dropped = 7 WHERE key_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`,
      [dailyKeyId],
    );
    const after = (await call('GET', '/v1/webhooks', k.daily)).json();
    expect(after).toMatchObject({
      data: [expect.objectContaining({ id })],
      usage: { day: utcDay(), messages: 1, dropped: 7, limit: 100_000 },
      plan: 'pro',
    });
    // Another key's day is its own.
    expect((await call('GET', '/v1/webhooks', k.pro2)).json().usage).toMatchObject({ messages: 0, dropped: 0 });
    await call('DELETE', `/v1/webhooks/${id}`, k.daily);
  });

  it("tests and retries count against the key's daily limit: past it 429 webhook_daily_limit until the next UTC day, nothing made", async () => {
    const { id } = (await create(k.daily)).json().data;
    await hooks.pool.query(
      `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, attempts, committed_at)
       VALUES ('msg_day1', $1, 'price.changed', '{}', 1, 'failed', 4, now()),
              ('msg_day2', $1, 'price.changed', '{}', 1, 'delivering', 1, now())`,
      [id],
    );
    const limit = WEBHOOK_LIMITS.pro.messagesPerDay;
    // One left today: the test takes it, the retry after it is refused.
    await setUsage(limit - 1);
    expect((await call('POST', `/v1/webhooks/${id}/test`, k.daily)).statusCode).toBe(202);
    expect(await usedToday()).toBe(limit);
    const messagesBefore = await hooks.pool.query(
      'SELECT count(*)::int AS n FROM webhook_messages WHERE subscription_id = $1',
      [id],
    );
    for (const url of [`/v1/webhooks/${id}/test`, `/v1/webhooks/${id}/deliveries/msg_day1/retry`]) {
      const res = await call('POST', url, k.daily);
      expect(res.statusCode, url).toBe(429);
      expect(res.json()).toEqual({
        error: { status: 429, code: 'webhook_daily_limit', message: expect.stringMatching(/100000 .* today \(UTC\)/) },
      });
      const wait = Number(res.headers['retry-after']);
      expect(wait).toBeGreaterThan(0);
      expect(Math.abs(wait - secondsToUtcMidnight())).toBeLessThan(5);
    }
    expect(await usedToday()).toBe(limit);
    const messagesAfter = await hooks.pool.query(
      'SELECT count(*)::int AS n FROM webhook_messages WHERE subscription_id = $1',
      [id],
    );
    expect(messagesAfter.rows[0].n).toBe(messagesBefore.rows[0].n);
    const failed = await hooks.pool.query(`SELECT status, attempts FROM webhook_messages WHERE id = 'msg_day1'`);
    expect(failed.rows[0]).toEqual({ status: 'failed', attempts: 4 });
    // One being delivered is left to its attempt: nothing made, nothing counted, no 429.
    const delivering = await call('POST', `/v1/webhooks/${id}/deliveries/msg_day2/retry`, k.daily);
    expect(delivering.statusCode).toBe(202);
    expect(delivering.json().data).toMatchObject({ id: 'msg_day2', status: 'delivering' });
    // Unknown ones are still 404, not 429.
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/msg_none/retry`, k.daily)).statusCode).toBe(404);
    // Room again (another day, or a lower count): the retry is made and counted.
    await setUsage(limit - 1);
    const retried = await call('POST', `/v1/webhooks/${id}/deliveries/msg_day1/retry`, k.daily);
    expect(retried.statusCode, retried.body).toBe(202);
    expect(retried.json().data).toMatchObject({ status: 'pending', attempts: 0 });
    expect(await usedToday()).toBe(limit);
    // At once, many tests of one key never pass the limit between them.
    await setUsage(limit - 3);
    const many = await Promise.all(Array.from({ length: 8 }, () => call('POST', `/v1/webhooks/${id}/test`, k.daily)));
    expect(many.map((r) => r.statusCode).sort()).toEqual([202, 202, 202, 429, 429, 429, 429, 429]);
    expect(await usedToday()).toBe(limit);
    await setUsage(0);
    await call('DELETE', `/v1/webhooks/${id}`, k.daily);
  });

  it('a deadlock is retried once at once; twice in a row: 503 not_available with Retry-After, nothing kept', async () => {
    const { id } = (await create(k.enterprise)).json().data;
    // A trigger fails the message's insert with 40P01 while a sequence (not rolled back with the
    // transaction) is within the budget: as a deadlock PostgreSQL resolves against this request.
    const q = (name: string) => `"${hooks.name}".${name}`;
    await hooks.pool.query(`CREATE SEQUENCE ${q('conflicts')}`);
    await hooks.pool.query(`CREATE TABLE ${q('conflict_budget')} (n bigint NOT NULL)`);
    await hooks.pool.query(`INSERT INTO ${q('conflict_budget')} VALUES (1)`);
    await hooks.pool.query(
      `CREATE FUNCTION ${q('deadlock_once')}() RETURNS trigger LANGUAGE plpgsql AS $f$
       BEGIN
         IF nextval('${q('conflicts')}') <= (SELECT n FROM ${q('conflict_budget')}) THEN
           RAISE EXCEPTION 'deadlock detected (simulated)' USING ERRCODE = '40P01';
         END IF;
         RETURN NEW;
       END $f$`,
    );
    await hooks.pool.query(
      `CREATE TRIGGER deadlock_once BEFORE INSERT ON webhook_messages FOR EACH ROW
       WHEN (NEW.subscription_id = '${id}') EXECUTE FUNCTION ${q('deadlock_once')}()`,
    );
    try {
      const once = await call('POST', `/v1/webhooks/${id}/test`, k.enterprise);
      expect(once.statusCode, once.body).toBe(202);
      // The sequence is at 2: its next two values fail the next request's first run and its retry.
      await hooks.pool.query(`UPDATE ${q('conflict_budget')} SET n = 4`);
      const refused = await call('POST', `/v1/webhooks/${id}/test`, k.enterprise);
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json().error).toMatchObject({ status: 503, code: 'not_available' });
      expect(refused.headers['retry-after']).toBe('1');
      const { rows } = await hooks.pool.query(
        'SELECT count(*)::int AS n FROM webhook_messages WHERE subscription_id = $1',
        [id],
      );
      expect(rows[0].n).toBe(1);
    } finally {
      await hooks.pool.query('DROP TRIGGER deadlock_once ON webhook_messages');
      await hooks.pool.query(`DROP FUNCTION ${q('deadlock_once')}()`);
      await hooks.pool.query(`DROP TABLE ${q('conflict_budget')}`);
      await hooks.pool.query(`DROP SEQUENCE ${q('conflicts')}`);
    }
  });

  it('without WEBHOOK_SECRET_KEYS, or before the notifier made the schema: 503 webhooks_unavailable', async () => {
    const read = await stack.schema();
    const unconfigured = await startApi(stack, read.pool, { plans: ['basic', 'pro'] });
    const res = await unconfigured.app.inject({
      method: 'GET',
      url: '/v1/webhooks',
      headers: { 'x-api-key': unconfigured.keys.pro },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe('webhooks_unavailable');
    expect(res.headers['retry-after']).toBeDefined();
    // The plan gate comes first, configured or not.
    const basic = await unconfigured.app.inject({
      method: 'GET',
      url: '/v1/webhooks',
      headers: { 'x-api-key': unconfigured.keys.basic },
    });
    expect(basic.json().error.code).toBe('plan_required');
    const missing = await startApi(stack, read.pool, {
      plans: ['pro'],
      deps: { webhooks: { databaseUrl: stack.env.databaseUrl, schema: uniqueName('absent'), secretKeys: RING } },
    });
    for (const [method, url, payload] of [
      ['GET', '/v1/webhooks'],
      ['POST', '/v1/webhooks', { url: URL_OK }],
      ['GET', '/v1/webhooks/wh_x/deliveries'],
    ] as const) {
      const r = await missing.app.inject({ method, url, headers: { 'x-api-key': missing.keys.pro }, payload });
      expect(r.statusCode, `${method} ${url}`).toBe(503);
      expect(r.json().error).toMatchObject({
        code: 'webhooks_unavailable',
        message: expect.stringMatching(/notifier/),
      });
    }
  });

  /** Requests of a pro key (api_keys.id `keyId`) to an API whose webhooks database is at `databaseUrl`. */
  const apiOn = async (databaseUrl: string) => {
    const read = await stack.schema();
    const api = await startApi(stack, read.pool, {
      deps: { webhooks: { databaseUrl, schema: hooks.name, secretKeys: RING } },
    });
    const { key, secret } = await api.store.create({ customer: 'elsewhere@test.example', plan: 'pro' });
    const ask = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) =>
      api.app.inject({ method, url, headers: { 'x-api-key': secret }, ...(payload ? { payload } : {}) });
    return Object.assign(ask, { keyId: key.id });
  };
  const expectUnavailable = (
    res: { statusCode: number; body: string; headers: Record<string, unknown> },
    hint: RegExp,
  ) => {
    expect(res.statusCode, res.body).toBe(503);
    expect(JSON.parse(res.body)).toEqual({
      error: { status: 503, code: 'webhooks_unavailable', message: expect.stringMatching(hint) },
    });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  };

  it('webhooks database unreachable (refused, or a host name that does not resolve): 503 webhooks_unavailable, never 500', async () => {
    const refused = await apiOn('postgres://postgres@127.0.0.1:1/skinprices');
    expectUnavailable(await refused('GET', '/v1/webhooks'), /refuses connections.*WEBHOOKS_DATABASE_URL/);
    expectUnavailable(await refused('POST', '/v1/webhooks', { url: URL_OK }), /refuses connections/);
    const unresolved = await apiOn('postgres://postgres@webhooks-db.invalid:5432/skinprices');
    expectUnavailable(await unresolved('GET', '/v1/webhooks'), /host name .*resolve/);
  });

  it('webhooks database misconfigured (no such database): 503 webhooks_unavailable naming it', async () => {
    const url = new URL(stack.env.databaseUrl);
    url.pathname = `/${uniqueName('nodb')}`;
    const missing = await apiOn(url.href);
    expectUnavailable(await missing('GET', '/v1/webhooks'), /database does not exist/);
  });

  // The mistake this guards: WEBHOOKS_DATABASE_URL left at (or copied from) a replica's
  // DATABASE_URL. Reads work there, every write fails 25006, which answered 500 internal.
  it('webhooks database read-only (default_transaction_read_only): writes 503 webhooks_unavailable saying to use the primary', async () => {
    const url = new URL(stack.env.databaseUrl);
    url.searchParams.set('options', '-c default_transaction_read_only=on');
    const ask = await apiOn(url.href);
    // One of its subscriptions, made on the primary, for the writes that need one.
    const id = 'wh_readonly000000000000000000';
    await hooks.pool.query(
      `INSERT INTO webhook_subscriptions (id, key_id, url, filters, secret_sealed) VALUES ($1, $2, $3, '{}', 'x')`,
      [id, ask.keyId, URL_OK],
    );
    await hooks.pool.query(
      `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, committed_at)
       VALUES ('msg_readonly', $1, 'webhook.test', '{}', 1, 'failed', now())`,
      [id],
    );
    const list = await ask('GET', '/v1/webhooks');
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json().data.map((w: { id: string }) => w.id)).toEqual([id]);
    for (const [method, path, payload] of [
      ['POST', '/v1/webhooks', { url: URL_OK }],
      ['POST', `/v1/webhooks/${id}/test`],
      ['POST', `/v1/webhooks/${id}/enable`],
      ['POST', `/v1/webhooks/${id}/rotate-secret`],
      ['POST', `/v1/webhooks/${id}/deliveries/msg_readonly/retry`],
      ['DELETE', `/v1/webhooks/${id}`],
    ] as const)
      expectUnavailable(await ask(method, path, payload), /read-only .*primary/);
    await hooks.pool.query('DELETE FROM webhook_subscriptions WHERE id = $1', [id]);
  });

  it('webhooks database a hot standby (make up-replica): writes 503 webhooks_unavailable', async (ctx) => {
    const standby = new pg.Client({ connectionString: STANDBY_URL });
    const up = await standby
      .connect()
      .then(() => standby.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r'))
      .then((r) => r.rows[0]?.r === true)
      .catch(() => false);
    stack.defer(() => standby.end().catch(() => undefined));
    if (!up) ctx.skip();
    // The webhooks schema replayed on the standby: a missing one would be the not-migrated 503.
    await expect
      .poll(
        async () =>
          (await standby.query('SELECT to_regclass($1) AS t', [`${hooks.name}.webhook_subscriptions`])).rows[0].t,
        { timeout: 30_000 },
      )
      .not.toBeNull();
    const ask = await apiOn(STANDBY_URL);
    expect((await ask('GET', '/v1/webhooks')).statusCode).toBe(200);
    expectUnavailable(await ask('POST', '/v1/webhooks', { url: URL_OK }), /read-only .*primary/);
  });

  it('is in the OpenAPI document with its plan, bodies and statuses', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const create = doc.paths['/v1/webhooks'].post;
    expect(create['x-plan']).toBe('pro');
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(['201', '400', '403', '413', '415', '503']));
    expect(create.requestBody.content['application/json'].schema.required).toEqual(['url']);
    expect(doc.paths['/v1/webhooks/{id}'].delete.responses['204']).toBeDefined();
    expect(doc.paths['/v1/webhooks/{id}/test'].post.responses['202']).toBeDefined();
    expect(doc.paths['/v1/webhooks/{id}/deliveries/{message_id}/retry'].post['x-plan']).toBe('pro');
  });

  // Third-party validation (openapi-backend) of every answer against the served document, with
  // requests generated from it: every documented status a client can cause, on a listening API.
  it('answers every webhook operation as the served OpenAPI document says', async () => {
    const read = await stack.schema();
    const served = await startApi(stack, read.pool, {
      plans: ['basic'],
      listen: true,
      deps: { webhooks: { databaseUrl: stack.env.databaseUrl, schema: hooks.name, secretKeys: RING } },
    });
    const make = async (plan: Plan, extra = {}) =>
      (await served.store.create({ customer: `${plan}@contract.example`, plan, ...extra })).secret;
    const keys = {
      basic: served.keys.basic,
      pro: await make('pro'),
      enterprise: await make('enterprise'),
      disabled: await make('pro', { disabled: true }),
      expired: await make('pro', { expiresAt: new Date(Date.now() - 1000) }),
    };
    const ask = (method: 'POST' | 'GET', path: string, body?: unknown) =>
      fetch(`${served.origin}${path}`, {
        method,
        headers: { 'x-api-key': keys.pro, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      }).then((r) => r.json() as Promise<{ data: Record<string, string> }>);
    const id = (await ask('POST', '/v1/webhooks', { url: URL_OK })).data.id!;
    const messageId = (await ask('POST', `/v1/webhooks/${id}/test`)).data.message_id!;
    const report = await checkContract(served.origin!, {
      keys,
      samples: { id, message_id: messageId, url: URL_OK },
      drift: 'GET /v1/webhooks',
      only: (op) => op.includes(' /v1/webhooks'),
    });
    expect.soft({ violations: report.violations, unexercised: report.unexercised }).toEqual({
      violations: [],
      unexercised: [],
    });
    expect.soft(report.drift.cleanBefore).toEqual([]);
    expect.soft(report.drift.document.length).toBeGreaterThan(0);
    expect.soft(report.drift.answer.length).toBeGreaterThan(0);
    expect(report.probes).toBeGreaterThan(80);
  }, 120_000);
});
