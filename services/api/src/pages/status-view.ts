/**
 * The status page's view: what GET /status shows, read for the key that asks (the status report,
 * and a searched item's prices and chart as far as the key may call those endpoints). Kept apart
 * from the HTML (status-render.ts) so the reads and the rules on what a key may see stay in one place.
 */
import { MARKETS, type MarketSlug } from '@skinprices/domain';
import type { ApiKey } from '../keys.js';
import { planFor, planIncludes, type EndpointId } from '../plans.js';
import type { ReadModel } from '../readmodel.js';
import type { HistoryPoint } from '../routes/schemas.js';
import type { StatusReport } from '../status.js';

/** Marketplaces of the item's prices: those GET /v1/prices/search serves by default. */
const SEARCH_MARKETS: readonly MarketSlug[] = MARKETS.filter((m) => m.capabilities.includes('listings')).map(
  (m) => m.slug,
);
/** Marketplaces with a daily history (GET /v1/prices/{market}/history). */
export const CHART_MARKETS: readonly MarketSlug[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);

export interface ItemView {
  name: string;
  /** ReadModel.search rows; undefined when the key may not call GET /v1/prices/search. */
  rows: Record<string, unknown>[] | undefined;
  /** The chart; undefined when the key may not call the history endpoint or nothing was found. */
  history: { market: MarketSlug; phase: string; points: HistoryPoint[] } | undefined;
  /** What the key may not see, by endpoint. */
  refused: EndpointId[];
}

export interface StatusPageView {
  report: StatusReport;
  customer: string;
  plan: string;
  /** The form's values as asked. */
  query: { item: string; market: string; phase: string | undefined };
  item: ItemView | undefined;
}

/** What a key may call, by the same rules as the endpoints themselves (plan, then ACL). */
const mayCall = (key: ApiKey, id: EndpointId) =>
  planIncludes(key.plan, planFor(id)) && (!key.allowedEndpoints || key.allowedEndpoints.includes(id));

export async function loadItem(
  read: ReadModel,
  key: ApiKey,
  name: string,
  market: MarketSlug | undefined,
  phase: string | undefined,
): Promise<ItemView> {
  const refused: EndpointId[] = [];
  let rows: Record<string, unknown>[] | undefined;
  if (mayCall(key, 'GET /v1/prices/search')) rows = await read.search(name, SEARCH_MARKETS);
  else refused.push('GET /v1/prices/search');
  let history: ItemView['history'];
  if (!mayCall(key, 'GET /v1/prices/{market}/history')) refused.push('GET /v1/prices/{market}/history');
  else if (market || (rows?.length ?? 0) > 0 || (await read.knowsItem(name))) {
    const ph = phase ?? String(rows?.[0]?.phase ?? '');
    const listed = new Set((rows ?? []).map((r) => String(r.market)));
    // The chosen marketplace, or the first with data: those listing the item now first. At most
    // one query per history marketplace (14), once per page view.
    const candidates = market
      ? [market]
      : [...CHART_MARKETS.filter((m) => listed.has(m)), ...CHART_MARKETS.filter((m) => !listed.has(m))];
    for (const m of candidates) {
      const points = await read.history(m, name, ph, 'daily');
      if (points.length > 0 || market) {
        history = { market: m, phase: ph, points };
        break;
      }
    }
  }
  return { name, rows, history, refused };
}
