/**
 * The pages for people, in headless Chromium (Debian's package) against a real pipeline
 * (simulator → pollers → Kafka → materializer → PostgreSQL → API on a loopback port):
 * - /docs, the interactive reference: the operations render, a key pasted into Authorize is sent
 *   by "Try it out", and no request leaves 127.0.0.1;
 * - /status: the freshness table and the pipeline as /v1/status reports them, one item's prices as
 *   /v1/prices/search returns them, and its daily closes as an SVG line;
 * - the regression of history for an item never seen (404, not an empty 200).
 * Each browser test saves a screenshot and prints its path.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_MIGRATIONS_DIR, buildApp, KeyStore, MemoryRateLimiter, ReadModel } from '@skinprices/api';
import type { MarketSlug } from '@skinprices/domain';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../support/clients.js';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const DAY = 86_400_000;

describe('pages in Chromium on a real pipeline', () => {
  const stack = new TestStack();
  const shots = mkdtempSync(join(tmpdir(), 'skinprices-pages-'));
  let sim: Sim;
  let pool: Pool;
  let app: FastifyInstance;
  let origin: string;
  let key: string;
  let browser: Browser;
  let item: string;

  beforeAll(async () => {
    sim = await startSimulator(stack, 60);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool, { heartbeatIntervalMs: 1000 });
    // CN-A on three days (three daily closes for the chart), two more listing marketplaces.
    const { poller: cnA } = await startPoller(stack, sim, 'cn-a', suffix);
    for (let day = 0; day < 3; day++) {
      if (day > 0) await sim.control('POST', '/_sim/clock', { advanceMs: DAY });
      await untilApplied(pool, (await cnA.runOnce('LISTINGS')).marker.cycle_id);
    }
    for (const market of ['eu-a', 'cn-b'] as MarketSlug[]) {
      const { poller } = await startPoller(stack, sim, market, suffix);
      await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id);
    }
    const { pool: keysPool } = await stack.schema();
    await migrate(keysPool, API_MIGRATIONS_DIR);
    const keys = new KeyStore(keysPool);
    key = (await keys.create({ customer: 'viewer@example.com', plan: 'basic', perSecond: 1000 })).secret;
    app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => 0,
      logger: createLogger('api', 'silent'),
    });
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
    // An item with at least two daily closes on CN-A, listed on EU-A too; a ★ or a quote in its
    // name if the catalogue has one (the page must escape them).
    const { rows } = await pool.query<{ market_hash_name: string }>(
      `SELECT d.market_hash_name FROM listing_daily d
       JOIN listings_current e ON e.market = 'eu-a' AND e.market_hash_name = d.market_hash_name
                              AND e.phase = d.phase AND e.price IS NOT NULL
       WHERE d.market = 'cn-a' AND d.phase = ''
       GROUP BY 1 HAVING count(*) >= 2
       ORDER BY (d.market_hash_name ~ '[★"'']') DESC, 1 LIMIT 1`,
    );
    item = rows[0]!.market_hash_name;
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await stack.cleanup();
  });

  /** Every request the page makes, to check that none leaves this origin. */
  function recordRequests(page: Page): string[] {
    const urls: string[] = [];
    page.on('request', (r) => urls.push(r.url()));
    return urls;
  }
  /** Console errors (a CSP violation shows there: something the page needs was refused). */
  function recordErrors(page: Page): string[] {
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    return errors;
  }
  const offOrigin = (urls: readonly string[]) =>
    urls.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));

  const api = async (url: string) => {
    const res = await app.inject({ url, headers: { 'x-api-key': key } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  it('/docs: Swagger UI lists the operations; Authorize with a key, Try it out, Execute GET /v1/status → 200', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const urls = recordRequests(page);
    const errors = recordErrors(page);
    const sentKeys: (string | undefined)[] = [];
    page.on('request', (r) => {
      if (r.url().startsWith(`${origin}/v1/status`)) sentKeys.push(r.headers()['x-api-key']);
    });
    await page.goto(`${origin}/docs`);
    const listing = page.locator('.opblock-summary', { has: page.locator('[data-path="/v1/prices/{market}"]') });
    await listing.first().waitFor({ timeout: 20_000 });
    expect(await page.locator('.opblock-summary-method').count()).toBeGreaterThanOrEqual(13);
    const top = join(shots, 'docs-top.png');
    await page.screenshot({ path: top });
    console.log(`screenshot of /docs: ${top}`);

    await page.locator('button.authorize').first().click();
    const apiKeyAuth = page.locator('.auth-container', { hasText: 'ApiKeyAuth' });
    await apiKeyAuth.locator('input').fill(key);
    await apiKeyAuth.locator('button.authorize').click();
    await page.locator('.modal-ux button.btn-done').first().click();

    const op = page.locator('.opblock', { has: page.locator('[data-path="/v1/status"]') });
    await op.locator('.opblock-summary').click();
    await op.locator('button.try-out__btn').click();
    await op.locator('button.execute').click();
    const status = op.locator('.live-responses-table tbody .response-col_status').first();
    await status.waitFor({ timeout: 20_000 });
    expect((await status.textContent())?.trim()).toBe('200');
    await expect
      .poll(
        async () =>
          (await op.locator('.live-responses-table tbody .response-col_description').first().textContent()) ?? '',
      )
      .toContain('"requestor": "viewer@example.com"');
    expect(sentKeys).toEqual([key]);

    await op.locator('.live-responses-table').first().scrollIntoViewIfNeeded();
    const shot = join(shots, 'docs.png');
    await page.screenshot({ path: shot, fullPage: false });
    console.log(`screenshot of /docs after Try it out: ${shot}`);
    expect(offOrigin(urls)).toEqual([]);
    expect(urls.some((u) => u.includes('/docs/assets/swagger-ui-bundle.js'))).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('/status: the key form, then freshness per marketplace and kind, the pipeline, the item prices and its chart', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const urls = recordRequests(page);
    const errors = recordErrors(page);
    const first = await page.goto(`${origin}/status?item=${encodeURIComponent(item)}`);
    expect(first?.status()).toBe(401);
    await page.locator('#key-form input[name=key]').fill(key);
    await Promise.all([
      page.waitForResponse((r) => r.url().includes('/status/key')),
      page.locator('#key-form button[type=submit]').click(),
    ]);
    await page.locator('#freshness').waitFor({ timeout: 10_000 });
    // The key went into an HttpOnly cookie, never into the URL.
    expect(page.url()).not.toContain(key);
    const cookies = await context.cookies();
    expect(cookies.find((c) => c.name === 'sp_status_key')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

    const status = (await api('/v1/status')) as {
      markets: { market: string; kind: string; stale: boolean }[];
      pipeline: { status: string };
    };
    const rows = await page
      .locator('#freshness tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [tr.dataset.market, tr.dataset.kind, tr.dataset.stale]));
    expect(rows).toEqual(status.markets.map((m) => [m.market, m.kind, String(m.stale)]));
    expect(rows.map(([m, k]) => `${m}/${k}`)).toEqual(
      expect.arrayContaining(['cn-a/LISTINGS', 'eu-a/LISTINGS', 'cn-b/LISTINGS']),
    );
    expect(await page.locator('#lag').textContent()).toMatch(/^\d+ records$|^unknown$/);
    expect(await page.locator('#materializers tbody tr').count()).toBeGreaterThanOrEqual(1);

    expect(await page.locator('#item').textContent()).toBe(item);
    const search = (await api(`/v1/prices/search?market_hash_name=${encodeURIComponent(item)}`)) as {
      data: { market: string; phase: string; price?: string; price_rmb?: string }[];
    };
    const shown = await page
      .locator('#prices tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [tr.dataset.market, tr.dataset.phase, tr.querySelector('.price')?.textContent]),
      );
    expect(shown).toEqual(search.data.map((r) => [r.market, r.phase, r.price_rmb ?? r.price]));
    expect(shown.length).toBeGreaterThanOrEqual(2);

    const d = (await page.locator('#history svg path').getAttribute('d')) ?? '';
    const points = d.match(/[ML]\s*[\d.]+\s+[\d.]+/g) ?? [];
    expect(points.length).toBeGreaterThanOrEqual(2);
    const history = (await api(
      `/v1/prices/${await page.locator('#history').getAttribute('data-market')}/history?market_hash_name=${encodeURIComponent(item)}`,
    )) as { points: unknown[] };
    expect(points.length).toBe(history.points.length);

    const shot = join(shots, 'status.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot of /status?item=${item}: ${shot}`);
    expect(offOrigin(urls)).toEqual([]);
    // The 401 of the first visit is logged as a failed resource; nothing else may be.
    expect(errors.filter((e) => !/status of 401/.test(e))).toEqual([]);
    await context.close();
  });

  it('/status with the key as a header (clients that can send one) renders without the form', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-api-key': key } });
    const page = await context.newPage();
    const res = await page.goto(`${origin}/status`);
    expect(res?.status()).toBe(200);
    expect(await page.locator('#freshness tbody tr').count()).toBeGreaterThanOrEqual(3);
    await context.close();
  });

  // Root cause: the history handler returned whatever rows the query found, so an unknown name
  // (a typo) was a 200 with no points, indistinguishable from "no data yet".
  it('history of an item never seen is a 404 not_found; a known item without points here stays 200 []', async () => {
    const typo = await app.inject({
      url: `/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(`${item}x`)}`,
      headers: { 'x-api-key': key },
    });
    expect(typo.statusCode).toBe(404);
    expect(typo.json()).toEqual({ error: { status: 404, code: 'not_found', message: expect.any(String) } });
    const quiet = await api(`/v1/prices/usd-3/history?market_hash_name=${encodeURIComponent(item)}`);
    expect(quiet.points).toEqual([]);
    expect(
      (await api(`/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(item)}`)).points.length,
    ).toBeGreaterThanOrEqual(2);
  });
});
