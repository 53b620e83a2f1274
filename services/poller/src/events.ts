/**
 * Data kind → event kind, topic and row identity; and row → event (adds the envelope fields).
 */
import { itemPageUrl, type Market } from '@skinprices/domain';
import type { DataKind, EventKind, EventMap } from '@skinprices/events';
import type { Kind, RowMap } from '@skinprices/marketplaces';

export const EVENT_OF: Record<Kind, EventKind> = {
  LISTINGS: 'listing',
  BUYORDERS: 'buyorder',
  FLOAT_RANGED: 'floatRanged',
  FLOAT_BUYORDERS: 'floatBuyorder',
  SALES: 'sale',
  ORDER_BOOK: 'orderBook',
  HISTORY: 'historyPoint',
};

/** Kinds whose rows are states (not happenings) and cheap to compare: sent as deltas between full snapshots. */
export const DELTA_KINDS: ReadonlySet<Kind> = new Set(['LISTINGS', 'BUYORDERS']);

/** The identity of a row within one cycle: two rows with the same key are duplicates. */
export function rowKey<K extends Kind>(kind: K, row: RowMap[K]): string {
  const r = row as RowMap[K] & { market_hash_name: string; phase: string };
  switch (kind) {
    case 'BUYORDERS':
      return `${r.market_hash_name}\u0000${r.phase}\u0000${(row as RowMap['BUYORDERS']).tier ?? ''}`;
    case 'FLOAT_RANGED':
      return `${r.market_hash_name}\u0000${r.phase}\u0000${(row as RowMap['FLOAT_RANGED']).float_min}`;
    case 'FLOAT_BUYORDERS':
      return `${r.market_hash_name}\u0000${r.phase}\u0000${(row as RowMap['FLOAT_BUYORDERS']).order_id}`;
    case 'SALES':
      return (row as RowMap['SALES']).sale_id;
    default:
      return `${r.market_hash_name}\u0000${r.phase}`;
  }
}

export function toEvent<K extends Kind>(
  kind: K,
  market: Market,
  row: RowMap[K],
  observedAt: number,
  cycleId: string,
): EventMap[EventKind] {
  const base = { market: market.slug, currency: market.currency, observed_at: observedAt };
  // Sales and history points are happenings, not cycle states: they carry no cycle id.
  if (kind === 'SALES' || kind === 'HISTORY') return { ...base, ...row } as EventMap[EventKind];
  if (kind === 'LISTINGS') {
    // The spec promises a link on every listing row: the upstream's own wins, else the registry's template.
    const l = row as RowMap['LISTINGS'];
    const url = l.item_page_url ?? itemPageUrl(market, { market_hash_name: l.market_hash_name, id: l.template_id });
    return { ...base, ...l, item_page_url: url, cycle_id: cycleId } as EventMap[EventKind];
  }
  return { ...base, ...row, cycle_id: cycleId } as EventMap[EventKind];
}

/** The event saying "this row is gone" for delta kinds. */
export function removalOf<K extends Kind>(kind: K, row: RowMap[K]): RowMap[K] {
  if (kind === 'LISTINGS') return { ...(row as RowMap['LISTINGS']), price: null, count: 0 } as RowMap[K];
  return { ...(row as RowMap['BUYORDERS']), price: null, blue_price: null, count: 0 } as RowMap[K];
}

export const DATA_KIND: Record<Kind, DataKind> = {
  LISTINGS: 'LISTINGS',
  BUYORDERS: 'BUYORDERS',
  FLOAT_RANGED: 'FLOAT_RANGED',
  FLOAT_BUYORDERS: 'FLOAT_BUYORDERS',
  SALES: 'SALES',
  ORDER_BOOK: 'ORDER_BOOK',
  HISTORY: 'HISTORY',
};
