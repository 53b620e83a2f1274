/**
 * When the soak's clock starts: once the platform has every kind of data of every marketplace
 * (a complete cycle of each in /v1/status) and a sales export, so the mix measures the steady
 * state and no answer is a 503 of a platform still filling (docs/api.md: the export is 503 until
 * its first build). A platform that takes longer than the deadline is soaked anyway, and the
 * result names what was missing.
 */
import { getJson, send } from './soak-http.js';
import type { Item } from './soak-mix.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface Ready {
  seconds: number;
  /** `market kind` without a complete cycle, and `export` without a build, at the deadline. */
  not_ready: string[];
  /** The catalogue the mix asks for: every item listed when the mix started. */
  items: Item[];
}

export async function untilReady(api: string, key: string, timeoutS: number): Promise<Ready> {
  const t0 = Date.now();
  const deadline = t0 + timeoutS * 1000;
  let missing: string[] = ['status'];
  while (Date.now() < deadline) {
    const status = await getJson<{ markets: { market: string; kind: string; last_complete_at: string | null }[] }>(
      api,
      key,
      '/v1/status',
    );
    missing = status
      ? status.markets.filter((m) => m.last_complete_at === null).map((m) => `${m.market} ${m.kind}`)
      : ['status'];
    if (missing.length === 0) {
      const zip = await send(api, key, { method: 'GET', path: '/v1/market-sales/export' });
      if (zip.status === 200) break;
      missing = ['export'];
    }
    await sleep(3_000);
  }
  return { seconds: Math.round((Date.now() - t0) / 1000), not_ready: missing, items: await catalogue(api, key) };
}

/** Every item of the catalogue, with its name and phase apart, in a fixed order. */
async function catalogue(api: string, key: string): Promise<Item[]> {
  const body = await getJson<{ items: Record<string, Record<string, { phase: string }>> }>(
    api,
    key,
    '/v1/prices/latest',
  );
  const items = Object.entries(body?.items ?? {}).map(([key, byMarket]) => {
    const phase = Object.values(byMarket)[0]?.phase ?? '';
    return { key, phase, name: phase ? key.slice(0, -(phase.length + 3)) : key, markets: Object.keys(byMarket) };
  });
  if (items.length === 0) throw new Error('the catalogue is empty: nothing to ask for');
  return items.sort((a, b) => a.key.localeCompare(b.key));
}
