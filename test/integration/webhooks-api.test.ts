/**
 * The webhook management API against the real PostgreSQL: plans and ACLs, subscriptions per key
 * (another key's are not found), the secret shown once and sealed at rest, URL and filter
 * refusals naming the field, the plan's subscription limit under concurrent creates, rotation,
 * test deliveries, the delivery log and retries, NOTIFY on every write, and the 503s of a server
 * without webhooks configured or without their schema. The webhooks schema is migrated here as
 * the notifier does at its start.
 */
import { WEBHOOKS_API_CONTRACT, type Plan } from '@skinprices/api';
import { contractDrift, contractTypeName, migrate, type Pool } from '@skinprices/store';
import { SecretBox, WEBHOOKS_MIGRATIONS_DIR } from '@skinprices/webhooks';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi } from '../support/api.js';
import { checkContract } from '../support/openapi-contract.js';
import { TestStack, uniqueName } from '../support/stack.js';

const RING = `k1:${SecretBox.generateKey()}`;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const URL_OK = 'https://hooks.example.com/skinprices';

describe('webhook management API', () => {
  const stack = new TestStack();
  let app: FastifyInstance;
  let hooks: { name: string; pool: Pool };
  const k: Record<Plan | 'pro2' | 'limited' | 'acl' | 'aclOk', string> = {
    basic: '',
    pro: '',
    enterprise: '',
    pro2: '',
    limited: '',
    acl: '',
    aclOk: '',
  };
  let listener: pg.Client;
  const notified: string[] = [];

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
    listener = new pg.Client({ connectionString: stack.env.databaseUrl });
    await listener.connect();
    listener.on('notification', (n) => notified.push(n.payload ?? ''));
    await listener.query('LISTEN skinprices_webhooks');
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
    expect(new Set(notified)).toEqual(new Set([hooks.name]));
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

  it('enable: a disabled subscription is active again, its failure clock reset', async () => {
    const { id } = (await create(k.enterprise)).json().data;
    await hooks.pool.query(
      `UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = 'every delivery failed for 24 h; last: 500',
         disabled_at = now(), failing_since = now() - interval '25 hours' WHERE id = $1`,
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

    notified.length = 0;
    const retry = await call('POST', `/v1/webhooks/${id}/deliveries/msg_t12/retry`, k.enterprise);
    expect(retry.statusCode, retry.body).toBe(202);
    expect(retry.json().data).toMatchObject({ id: 'msg_t12', status: 'pending', attempts: 0 });
    const { rows } = await hooks.pool.query(
      `SELECT status, attempts, first_attempt_at, next_attempt_at <= now() AS due FROM webhook_messages WHERE id = 'msg_t12'`,
    );
    // Its 24 hours of retries start over too.
    expect(rows[0]).toEqual({ status: 'pending', attempts: 0, first_attempt_at: null, due: true });
    await expect.poll(() => notified).toContain(hooks.name);
    // A message of another subscription (even of the same key) is not this one's.
    const other = (await create(k.enterprise)).json().data.id as string;
    expect((await call('POST', `/v1/webhooks/${other}/deliveries/msg_t11/retry`, k.enterprise)).statusCode).toBe(404);
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/msg_none/retry`, k.enterprise)).statusCode).toBe(404);
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

  it('PostgreSQL unreachable: 503 in the error shape', async () => {
    const read = await stack.schema();
    const away = await startApi(stack, read.pool, {
      plans: ['pro'],
      deps: {
        webhooks: { databaseUrl: 'postgres://postgres@127.0.0.1:1/skinprices', schema: hooks.name, secretKeys: RING },
      },
    });
    const res = await away.app.inject({ method: 'GET', url: '/v1/webhooks', headers: { 'x-api-key': away.keys.pro } });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: { status: 503, code: 'not_available', message: expect.any(String) } });
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
