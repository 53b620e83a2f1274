/**
 * End to end, booted exactly as `make run` boots it (infra/local/run.ts: simulator, a poller per
 * marketplace, materializer, API, each its own process), on topics, schemas and ports of its own:
 * the API answers with the simulator's truth, a price change upstream reaches the API and a
 * downstream subscriber (the example consumer, decoding through the registry), the demo keys
 * behave as printed, and SIGINT stops everything.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MARKETS } from '@skinprices/domain';
import { compatibilityOf, deleteTopics, schemaStem, schemaVersions, topicDefinitions } from '@skinprices/events';
import { createPool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { subscribePriceChanges, type PriceChange } from '../../examples/price-changes-consumer.js';
import { startWebhookReceiver, type ReceivedWebhook } from '../../examples/webhook-receiver.js';
import { browserFetchJson, curlGet } from '../support/clients.js';
import { itemPageUrlProblems, typeIdProblems } from '../support/contract.js';
import { javaSubscriber } from '../support/java-subscriber.js';
import { freePort } from '../support/services.js';
import { eventually } from '../support/eventually.js';
import { checkContract } from '../support/openapi-contract.js';
import { TestStack, uniqueName } from '../support/stack.js';
import { portFree } from '../../infra/local/run-guard.js';

const POLL_MS = 3_000;

/**
 * A base port below Linux's ephemeral range (32768+: a port there can be held by any outgoing
 * connection; CI once found poller-hist-a's taken) whose block is free: the API, the simulator's
 * control port and one per marketplace above it, and the metrics ports 2000 higher (API_PORT +
 * 2000 + n). A random base alone collided with RabbitMQ's distribution port 25672, which these
 * machines run (poller-cn-d's metrics port; `make run` refused to start, as it should).
 */
async function freeBlock(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 10_000);
    const block = Array.from({ length: 20 }, (_, i) => [base + i, base + 2_000 + i]).flat();
    const probes = await Promise.all(block.map((p) => portFree('127.0.0.1', p)));
    if (probes.every((r) => r.free)) return base;
  }
  throw new Error('no free block of ports for the platform between 20000 and 32000');
}

describe('end to end: make run', () => {
  const stack = new TestStack();
  const suffix = `.${uniqueName('e2e')}`;
  const schema = uniqueName('e2e');
  const keysSchema = `${schema}_keys`;
  const webhooksSchema = `${schema}_webhooks`;
  let port: number;
  let api: string;
  let control: string;
  const keysFile = join(mkdtempSync(join(tmpdir(), 'e2e-')), 'demo-keys.json');
  let run: ChildProcess;
  let keys: Record<'basic' | 'pro' | 'enterprise' | 'acl' | 'disabled' | 'expired', string>;
  const changes: PriceChange[] = [];
  let output = '';

  beforeAll(async () => {
    port = await freeBlock();
    api = `http://127.0.0.1:${port}`;
    control = `http://127.0.0.1:${port + 1}`;
    stack.defer(async () => {
      await deleteTopics(
        stack.kafka,
        topicDefinitions().map((t) => `${t.name}${suffix}`),
      );
      // The platform registered a subject per topic: nothing of the test stays in the registry.
      for (const t of topicDefinitions()) await stack.serde.deleteSubject(`${t.name}${suffix}-value`);
      const admin = createPool({ databaseUrl: stack.env.databaseUrl, max: 1 });
      await admin.query(
        `DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${keysSchema} CASCADE; DROP SCHEMA IF EXISTS ${webhooksSchema} CASCADE`,
      );
      await admin.end();
    });
    run = spawn(process.execPath, ['--import', 'tsx', 'infra/local/run.ts'], {
      env: {
        ...process.env,
        TOPIC_SUFFIX: suffix,
        DATABASE_SCHEMA: schema,
        KEYS_SCHEMA: keysSchema,
        WEBHOOKS_SCHEMA: webhooksSchema,
        API_PORT: String(port),
        SIM_CONTROL_PORT: String(port + 1),
        SIM_BASE_PORT: String(port + 2),
        DEMO_KEYS_FILE: keysFile,
        RUN_CATALOGUE_SIZE: '100',
        POLL_LISTINGS_MS: String(POLL_MS),
        HISTORY_BACKFILL_DAYS: '2',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    run.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    run.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    stack.defer(async () => {
      if (run.exitCode === null && run.signalCode === null) {
        run.kill('SIGINT');
        await new Promise((r) => run.once('exit', r));
      }
    });
    for (let i = 0; i < 600 && !output.includes('Ctrl-C stops everything'); i++) {
      if (run.exitCode !== null) throw new Error(`make run exited early:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(existsSync(keysFile)).toBe(true);
    keys = JSON.parse(readFileSync(keysFile, 'utf8'));
    const stop = await subscribePriceChanges(
      {
        brokers: stack.env.brokers.split(','),
        registryUrl: stack.env.registryUrl,
        topic: `price-changes.v1${suffix}`,
        groupId: uniqueName('example'),
        fromBeginning: true,
      },
      (c) => {
        changes.push(c);
      },
    );
    stack.defer(stop);
  }, 180_000);
  afterAll(() => stack.cleanup());

  const get = async (path: string, key = keys.pro) => {
    const res = await fetch(`${api}${path}`, { headers: { 'x-api-key': key } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  async function truth(market: string, kind: string): Promise<Record<string, unknown>[]> {
    return (
      (await (await fetch(`${control}/_sim/truth?market=${market}&kind=${kind}`)).json()) as {
        records: Record<string, unknown>[];
      }
    ).records;
  }

  it('every listing marketplace answers with the truth, and the catalogue and buy orders too', async () => {
    let last: unknown;
    try {
      for (const market of ['cn-a', 'cn-b', 'cn-c', 'cn-d', 'eu-a', 'eu-b']) {
        const rows = await eventually(
          `${market} equals the truth`,
          async () => {
            const want = (await truth(market, 'listings'))
              .filter((r) => r.price !== null)
              .map((r) => `${String(r.market_hash_name)}|${String(r.phase)}|${String(r.price)}|${String(r.count)}`)
              .sort();
            const { body } = await get(`/v1/prices/${market}`);
            const got = (body.data as Record<string, unknown>[])
              .map(
                (r) =>
                  `${String(r.market_hash_name)}|${String(r.phase)}|${String(r.price_rmb ?? r.price)}|${String(r.count)}`,
              )
              .sort();
            if (got.length > 0 && JSON.stringify(got) === JSON.stringify(want))
              return body.data as Record<string, unknown>[];
            last = {
              market,
              missing: want.filter((w) => !got.includes(w)).slice(0, 3),
              extra: got.filter((g) => !want.includes(g)).slice(0, 3),
            };
            return undefined;
          },
          90_000,
        );
        // 2.4 rows link to the item with their marketplace's template (was null on all of them).
        if (market !== 'cn-a') expect(itemPageUrlProblems(market, rows)).toEqual([]);
      }
      const usd = (await truth('usd-3', 'listings')).find((r) => r.price !== null && r.phase === '')!;
      await eventually(
        'usd-3 in the catalogue',
        async () => {
          const { body } = await get(`/v1/prices/latest?markets=usd-3`);
          const items = body.items as Record<string, Record<string, { price: string }>>;
          return items[String(usd.market_hash_name)]?.['usd-3']?.price === usd.price ? true : undefined;
        },
        30_000,
      );
      const cnB = await eventually(
        'cn-b buy orders equal the truth',
        async () => {
          const want = (await truth('cn-b', 'buyorders')).filter((r) => r.price !== null && r.tier === null).length;
          const { body } = await get('/v1/prices/cn-b/buyorder');
          const got = (body.data as { phase: string; buyorder_price: string | null }[]).filter(
            (r) => !/^T\d$/.test(r.phase),
          );
          return got.length === want ? (body.data as Record<string, unknown>[]) : undefined;
        },
        30_000,
      );
      // 2.5: typeId is an integer on every CN-B row, general orders included.
      expect(typeIdProblems(cnB)).toEqual([]);
    } catch (err) {
      throw new Error(
        `${String(err)}; last difference: ${JSON.stringify(last)}\n--- output ---\n${output.slice(-6000)}`,
      );
    }
  }, 240_000);

  it('the other endpoints answer from the same data: store, float-ranged, export, market cap, status', async () => {
    await eventually(
      'the store equals the truth',
      async () => {
        const want = (await truth('store', 'listings'))
          .filter((r) => r.price !== null)
          .map((r) => `${String(r.market_hash_name)} ${String(r.price)}`)
          .sort();
        const { body } = await get('/v1/store', keys.basic);
        const got = (body.data as { market_hash_name: string; price: string | null }[])
          .filter((r) => r.price !== null)
          .map((r) => `${r.market_hash_name} ${r.price}`)
          .sort();
        return got.length > 0 && JSON.stringify(got) === JSON.stringify(want) ? true : undefined;
      },
      60_000,
    );
    await eventually(
      'cn-a float-ranged buckets equal the truth',
      async () => {
        const want = (await truth('cn-a', 'float-ranged')).length;
        const { body } = await get('/v2/prices/float-ranged?market=cn-a');
        return want > 0 && (body.data as unknown[]).length === want ? true : undefined;
      },
      60_000,
    );
    const zip = await fetch(`${api}/v1/market-sales/export`, { headers: { 'x-api-key': keys.enterprise } });
    expect([200, 503]).toContain(zip.status);
    // Until the deriver has computed the first hour (after CN-A's first listings cycle), the daily
    // table's points serve, marked as such: the warm demo's fallback days (CI once asked in between).
    let fallbackClaimedCleaned = false;
    const cap = await eventually(
      'an hourly market-cap point',
      async () => {
        const { body } = await get('/v1/indexes/market-cap?resolution=hourly', keys.enterprise);
        const points = body.points as { cleaned: boolean }[];
        if (body.source === 'daily-fallback' && points.some((p) => p.cleaned)) fallbackClaimedCleaned = true;
        return body.source === 'hourly' && points.length > 0 ? body : undefined;
      },
      60_000,
    );
    expect(fallbackClaimedCleaned).toBe(false);
    expect((cap.points as { cleaned: boolean }[]).every((p) => p.cleaned)).toBe(true);
    const { body: status } = await get('/v1/status', keys.basic);
    const listings = (status.markets as { market: string; kind: string; stale: boolean }[]).filter(
      (m) => m.kind === 'LISTINGS',
    );
    expect(listings.map((m) => m.market).sort()).toEqual([
      'cn-a',
      'cn-b',
      'cn-c',
      'cn-d',
      'eu-a',
      'eu-b',
      'store',
      'usd-1',
      'usd-2',
      'usd-3',
      'usd-4',
      'usd-5',
      'usd-6',
    ]);
    for (const m of listings) expect(m.stale, m.market).toBe(false);
  }, 240_000);

  it('a price change upstream reaches the API, a subscriber of price-changes.v1 (through the registry) and a webhook', async () => {
    const row = (await truth('cn-a', 'listings')).find((r) => r.price !== null && r.phase === '')!;
    // A customer's receiver: the example, which checks every signature with the standardwebhooks
    // package. Subscribed through the API with the pro demo key, to this one item only.
    const received: ReceivedWebhook[] = [];
    const hookPort = await freePort();
    const hookUrl = `http://127.0.0.1:${hookPort}/hook`;
    const created = await fetch(`${api}/v1/webhooks`, {
      method: 'POST',
      headers: { 'x-api-key': keys.pro, 'content-type': 'application/json' },
      body: JSON.stringify({
        url: hookUrl,
        filters: { markets: ['cn-a'], items: [{ market_hash_name: row.market_hash_name, phase: '' }] },
      }),
    });
    expect(created.status).toBe(201);
    const subscription = ((await created.json()) as { data: { id: string; secret: string } }).data;
    const live = await startWebhookReceiver({ secret: subscription.secret, port: hookPort }, (m) => {
      received.push(m);
    });
    stack.defer(() => live.close());
    const started = Date.now();
    await fetch(`${control}/_sim/override`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        market: 'cn-a',
        market_hash_name: row.market_hash_name,
        phase: '',
        price: '12345.67',
        count: 3,
      }),
    });
    const inApi = await eventually(
      'the change in the API',
      async () => {
        const { body } = await get('/v1/prices/cn-a');
        const r = (body.data as { market_hash_name: string; price_rmb: string }[]).find(
          (x) => x.market_hash_name === row.market_hash_name,
        );
        return r?.price_rmb === '12345.67' ? Date.now() - started : undefined;
      },
      30_000,
    );
    const onTopic = await eventually(
      'the change on price-changes.v1',
      async () =>
        changes.some(
          (c) => c.market === 'cn-a' && c.market_hash_name === row.market_hash_name && c.new_price === '12345.67',
        )
          ? Date.now() - started
          : undefined,
      30_000,
    );
    const change = changes.find((c) => c.new_price === '12345.67')!;
    expect(change).toMatchObject({ old_price: row.price, new_count: 3, currency: 'CNY' });
    // The freshness target is 5 s after the poll that sees the change (the poll interval here is 3 s).
    console.log(`price change visible: API after ${inApi} ms, price-changes.v1 after ${onTopic} ms`);
    expect(inApi).toBeLessThan(POLL_MS + 5_000 + 2_000);
    expect(onTopic).toBeLessThan(POLL_MS + 5_000 + 2_000);
    const hooked = await eventually(
      'the change at the webhook receiver, signed',
      async () => (received.some((m) => m.changes[0]?.new_price === '12345.67') ? Date.now() - started : undefined),
      30_000,
    );
    console.log(`price change delivered to a webhook after ${hooked} ms`);
    // Once: a second message, or the same one again, would show here within the pollers' next cycles.
    await new Promise((r) => setTimeout(r, 2 * POLL_MS));
    // The simulator's walk may move the item too: the override's change is the one checked.
    const mine = received.filter((m) => m.changes.some((c) => c.market_hash_name === row.market_hash_name));
    const overridden = mine.filter((m) => m.changes[0]?.new_price === '12345.67');
    expect(overridden).toHaveLength(1);
    expect(mine.every((m) => !m.duplicate && m.type === 'price.changed')).toBe(true);
    expect(overridden[0]!.changes[0]).toMatchObject({
      market: 'cn-a',
      old_price: row.price,
      new_count: 3,
      currency: 'CNY',
    });
    const log = await get(`/v1/webhooks/${subscription.id}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.body.data).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: overridden[0]!.id, status: 'succeeded', attempts: 1 })]),
    );
  });

  // Root cause guarded: cached bodies were sent as two gzip members (shared head + per-key tail).
  // Node's fetch reads both; curl --compressed (the README's own command) exited 23 and Chromium's
  // fetch gave text without the closing envelope. Every cached-body endpoint, with full data.
  const CACHED_BODIES = [
    '/v1/prices/cn-a',
    '/v1/prices/eu-a',
    '/v1/prices/cn-a/buyorder',
    '/v1/prices/latest',
    '/v1/prices/latest?markets=cn-a,eu-a',
    '/v2/prices/float-ranged',
    '/v1/store',
  ];

  it("customers' clients read whole answers: curl --compressed and headless Chromium parse every cached body", async () => {
    for (const path of CACHED_BODIES) {
      const r = await curlGet(`${api}${path}`, keys.enterprise);
      expect({ path, exit: r.exit, status: r.status }).toEqual({ path, exit: 0, status: 200 });
      const body = JSON.parse(r.body) as { requestor?: string; plan?: string };
      expect({ path, plan: body.plan }).toEqual({ path, plan: 'enterprise' });
    }
    const seen = await browserFetchJson(api, '/docs', CACHED_BODIES, keys.enterprise);
    expect(seen.filter((s) => s.status !== 200 || !s.json)).toEqual([]);
    expect(seen.find((s) => s.path === '/v1/prices/latest')?.length).toBeGreaterThan(10_000);
  }, 60_000);

  it('the demo keys behave as printed', async () => {
    expect((await get('/v1/prices/cn-a', keys.basic)).status).toBe(200);
    expect((await get('/v1/indexes/market-cap', keys.enterprise)).status).toBe(200);
    expect((await get('/v1/prices/cn-a/buyorder', keys.basic)).status).toBe(403);
    expect((await get('/v1/prices/latest', keys.acl)).status).toBe(200);
    expect((await get('/v1/prices/cn-a', keys.acl)).status).toBe(403);
    expect((await get('/v1/prices/cn-a', keys.disabled)).body).toMatchObject({
      error: { status: 401, code: 'key_disabled' },
    });
    expect((await get('/v1/prices/cn-a', keys.expired)).body).toMatchObject({
      error: { status: 401, code: 'key_expired' },
    });
  });

  it('operators see every service: Prometheus /metrics of the materializer, the API, a poller and the notifier', async () => {
    const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const base = port + 2_000;
    expect(await scrape(base)).toMatch(/^materializer_consumer_lag\{/m);
    expect(await scrape(base)).toMatch(/^materializer_batch_apply_duration_seconds_count\{/m);
    expect(await scrape(base + 1)).toMatch(/^api_request_duration_seconds_count\{route="\/v1\/prices\/:market"/m);
    expect(await scrape(base + 1)).toMatch(/^api_auth_failures_total\{reason="disabled"\} 1/m);
    expect(await scrape(base + 2)).toMatch(/^poller_cycles_total\{market="cn-a"/m);
    // The notifier's port follows the pollers' (infra/local/run.ts); it delivered the webhook above.
    expect(await scrape(base + 2 + MARKETS.length)).toMatch(/^notifier_deliveries_total\{outcome="ok"\} [1-9]/m);
  });

  // Last before SIGINT: its refused keys would move the auth-failure counts the metrics test reads.
  it('every operation, on every marketplace and documented error, answers as the served OpenAPI document says', async () => {
    const name = String(
      (await truth('cn-a', 'listings')).find((r) => r.price !== null && r.phase === '')!.market_hash_name,
    );
    const report = await checkContract(api, {
      keys: { ...keys, acl: { key: keys.acl, allows: ['GET /v1/prices/latest'] } },
      samples: { market_hash_name: name, items: [name], markets: 'cn-a', since: 'now' },
      // A cursor of a change log that does not exist (epochs are random): 410 cursor_expired.
      provoke: { 410: { since: '000000000000-0' } },
      drift: 'GET /v1/prices/{market}',
      // The webhook subscriptions' operations have their own walk (webhooks-api.test.ts): here
      // they would spend the pro key's subscription limit on probes.
      only: (op) => !op.includes(' /v1/webhooks'),
    });
    console.log(
      `OpenAPI contract: ${report.probes} probes, ${report.answers} answers checked, ${report.violations.length} violations, ${report.unexercised.length} unexercised; planted drifts caught with ${report.drift.document.length} (document) and ${report.drift.answer.length} (answer) errors; not provoked: ${report.notProvoked.join('; ')}`,
    );
    // Soft: one failure shows the violations, the unexercised cases and the drift checks together.
    expect.soft({ violations: report.violations, unexercised: report.unexercised }).toEqual({
      violations: [],
      unexercised: [],
    });
    // The check can fail: a real answer, clean against the served document, fails a drifted copy,
    // and fails the served document once it carries a property the document does not list.
    expect.soft(report.drift.cleanBefore).toEqual([]);
    expect.soft(report.drift.document.length).toBeGreaterThan(0);
    expect.soft(report.drift.answer.length).toBeGreaterThan(0);
  }, 420_000);

  it('a Java subscriber (kafka-clients, Avro) decodes every record of every topic, with every kept reader too', async () => {
    const tallies = await javaSubscriber(
      stack.env,
      topicDefinitions().map((t) => ({ name: `${t.name}${suffix}`, stem: schemaStem(t.event) })),
    );
    expect(tallies.map((t) => t.topic)).toEqual(topicDefinitions().map((t) => `${t.name}${suffix}`));
    for (const [i, t] of tallies.entries()) {
      const kind = topicDefinitions()[i]!.event;
      expect(t.failures, `${t.topic}: ${t.firstFailure}`).toBe(0);
      expect(t.decoded, t.topic).toBe(t.records - t.tombstones);
      const versions = schemaVersions(kind).map((v) => `v${v.version}`);
      expect(Object.keys(t.readers), t.topic).toEqual(versions);
      // Every kept reader decodes every record (history.v1's withdrawn version 2 too).
      expect(compatibilityOf(kind), t.topic).toBe('FULL_TRANSITIVE');
      for (const [v, n] of Object.entries(t.readers))
        expect(n, `${t.topic} read with ${v}`).toEqual({ decoded: t.decoded, failures: 0 });
    }
    console.info(
      `java subscriber: ${tallies
        .map(
          (t) =>
            `${t.topic.slice(0, -suffix.length)} ${t.decoded} (${Object.entries(t.readers)
              .map(([v, n]) => `${v} ${n.failures} failed`)
              .join(', ')})`,
        )
        .join('; ')}`,
    );
    const byTopic = new Map(tallies.map((t) => [t.topic.slice(0, -suffix.length), t]));
    for (const topic of [
      'listings.v1',
      'poll-cycles.v1',
      'prices.current.v1',
      'price-changes.v1',
      'history.v1',
      'history-hours.v1',
    ])
      expect(byTopic.get(topic)?.decoded, topic).toBeGreaterThan(0);
  }, 300_000);

  it('SIGINT stops every service and exits 0', async () => {
    run.kill('SIGINT');
    const code = await new Promise<number | null>((r) => run.once('exit', (c) => r(c)));
    expect(code).toBe(0);
    await expect(fetch(`${api}/openapi.json`)).rejects.toThrow();
    await expect(fetch(`${control}/healthz`)).rejects.toThrow();
  }, 30_000);
});
