/**
 * The API follows the read model by its change position, not by LISTEN: run as deployed with
 * DB_LISTEN=false (what a hot standby forces, where LISTEN is refused), it serves every price
 * change committed to the read model within a second, and a rewrite that changes no served value
 * does not change its answers (their ETag stays).
 */
import { API_MIGRATIONS_DIR, KeyStore } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { waitForUrl } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startService, type Service } from '../support/services.js';
import { TestStack } from '../support/stack.js';

const MARKET = 'eu-a';
const ROWS = 2_000;
const ROUNDS = 15;
const APP = `api-position-${process.pid}`;
const name = (i: number) => `Position ${String(i).padStart(5, '0')}`;

describe('an API without LISTEN', () => {
  const stack = new TestStack();
  let pool: Pool;
  let api: Service;
  let origin: string;
  let key: string;

  beforeAll(async () => {
    const readModel = await stack.schema();
    pool = readModel.pool;
    await migrate(pool, MIGRATIONS_DIR);
    await pool.query(
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, changed_at, cycle_id)
       SELECT $1, $2 || lpad(i::text, 5, '0'), '', 'EUR', 10 + i, 1 + i % 7, now(), now(), 'c1'
       FROM generate_series(0, $3 - 1) i`,
      [MARKET, 'Position ', ROWS],
    );
    const keys = await stack.schema();
    await migrate(keys.pool, API_MIGRATIONS_DIR);
    // Polled every 50 ms: the per-second window is raised out of the way.
    const created = await new KeyStore(keys.pool).create({
      customer: 'position@test.example',
      plan: 'basic',
      perSecond: 1_000,
      perMinute: 100_000,
    });
    key = created.secret;
    const port = await freePort();
    api = startService('api', 'services/api/src/main.ts', {
      DATABASE_URL: stack.env.databaseUrl,
      DATABASE_SCHEMA: readModel.name,
      KEYS_SCHEMA: keys.name,
      API_HOST: '127.0.0.1',
      API_PORT: String(port),
      DB_LISTEN: 'false',
      // Its own name: other tests' API processes (which do LISTEN) may share the server.
      DB_APPLICATION_NAME: APP,
      // One process: the connections counted under its name are then all of the API's, not those
      // of whichever cluster workers had started when the port first answered.
      API_PROCESSES: '1',
      LOG_LEVEL: 'warn',
    });
    stack.defer(async () => void (await api.stop()));
    origin = `http://127.0.0.1:${port}`;
    await waitForUrl(`${origin}/openapi.json`, 120_000, 200).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${api.output()}`);
    });
  }, 180_000);
  afterAll(() => stack.cleanup());

  const list = async () => {
    const res = await fetch(`${origin}/v1/prices/${MARKET}`, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(200);
    return { etag: res.headers.get('etag'), body: await res.text() };
  };

  it('holds no LISTEN on any connection', async () => {
    await list();
    const { rows } = await pool.query<{ connections: number; listening: number }>(
      `SELECT count(*)::int AS connections, count(*) FILTER (WHERE query ILIKE 'LISTEN%')::int AS listening
       FROM pg_stat_activity WHERE application_name = $1`,
      [APP],
    );
    // Its connections are there under its name (the count below is not of nothing), none listening.
    expect(rows[0]?.connections).toBeGreaterThan(0);
    expect(rows[0]?.listening).toBe(0);
  });

  it('serves every committed price change within a second', async () => {
    await list();
    const took: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const i = (round * 131) % ROWS;
      const price = `${round + 1}${i}.${String(round).padStart(2, '0')}`;
      await pool.query(
        `UPDATE listings_current SET price = $2, observed_at = now(), changed_at = now() WHERE market = $3 AND market_hash_name = $1`,
        [name(i), price, MARKET],
      );
      const committed = performance.now();
      for (;;) {
        const { body } = await list();
        if (body.includes(`"market_hash_name":"${name(i)}"`) && body.includes(`"price":"${price}"`)) break;
        if (performance.now() - committed > 5_000) throw new Error(`${name(i)} at ${price} not served within 5 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
      took.push(performance.now() - committed);
    }
    took.sort((a, b) => a - b);
    expect(took.at(-1), `commit → served, ms: ${took.map(Math.round).join(' ')}`).toBeLessThan(1_000);
  });

  it('keeps its answer when a rewrite changes no served value', async () => {
    const before = await list();
    await pool.query(`UPDATE listings_current SET observed_at = now(), cycle_id = 'again' WHERE market = $1`, [MARKET]);
    // Two of the follower's reads and a list refresh's wait later.
    await new Promise((r) => setTimeout(r, 1_200));
    const after = await list();
    expect(after.etag).toBe(before.etag);
    expect(after.body).toBe(before.body);
  });
});
