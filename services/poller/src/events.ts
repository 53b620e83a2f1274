/**
 * Rows → events: the envelope fields every event carries, the removal a delta kind sends for a
 * row that is gone, and a row's identity within a cycle. What each kind is (its event, mode and
 * identity) comes from the domain's descriptor (packages/domain kinds.ts).
 */
import { DATA_KINDS, itemPageUrl, rowIdentity, type DataKindInfo, type Market } from '@skinprices/domain';
import type { EventKind, EventMap, HistoryHoursEvent, HistoryPointEvent } from '@skinprices/events';
import type { Kind, RowMap } from '@skinprices/marketplaces';

/** The event kind of a data kind's records. */
export function eventOf(kind: Kind): EventKind {
  return DATA_KINDS[kind].event;
}

/** Kinds whose rows are states cheap to compare: sent as deltas between full snapshots. */
export function isDeltaKind(kind: Kind): boolean {
  return DATA_KINDS[kind].mode === 'delta';
}

/** The identity of a row within one cycle: two rows with the same key are duplicates. */
export function rowKey<K extends Kind>(kind: K, row: RowMap[K]): string {
  return rowIdentity(kind, row);
}

export function toEvent<K extends Kind>(
  kind: K,
  market: Market,
  row: RowMap[K],
  observedAt: number,
  cycleId: string,
): EventMap[EventKind] {
  // Object.assign, not `{ ...base, ...row, cycle_id }`: V8 in Node 20 builds a spread followed by
  // more properties on a slow path, some thirty times slower, and this runs once per upstream row.
  const event: Record<string, unknown> = { market: market.slug, currency: market.currency, observed_at: observedAt };
  Object.assign(event, row);
  // Happenings (sales, history points) are not cycle states: they carry no cycle id.
  if (DATA_KINDS[kind].mode === 'append') return event as unknown as EventMap[EventKind];
  const info: DataKindInfo = DATA_KINDS[kind];
  if (info.linksItemPage) {
    const listing = row as RowMap['LISTINGS'];
    // The spec promises a link on every listing row: the upstream's own wins, else the registry's template.
    event.item_page_url =
      listing.item_page_url ??
      itemPageUrl(market, { market_hash_name: listing.market_hash_name, id: listing.template_id });
  }
  event.cycle_id = cycleId;
  return event as unknown as EventMap[EventKind];
}

/**
 * Whether two rows of a kind say the same (plain JSON-like values, compared deeply): what comparing
 * their JSON.stringify would say, without building two strings per row and cycle.
 */
export function sameRow(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameRow(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  let keys = 0;
  for (const k in a) {
    const v = (a as Record<string, unknown>)[k];
    // An undefined property is an absent one, as JSON.stringify had it.
    if (v === undefined) continue;
    if (!sameRow(v, (b as Record<string, unknown>)[k])) return false;
    keys++;
  }
  for (const k in b) if ((b as Record<string, unknown>)[k] !== undefined) keys--;
  return keys === 0;
}

/**
 * The row saying "this one is gone" for delta kinds: the row with the descriptor's `cleared`
 * values, or, for a kind whose rows are deleted, its last state with `removed: true`.
 */
export function removalOf<K extends Kind>(kind: K, row: RowMap[K]): RowMap[K] {
  const { cleared, deletes }: DataKindInfo = DATA_KINDS[kind];
  if (cleared !== undefined) return Object.assign({}, row, cleared);
  if (deletes) return Object.assign({}, row, { removed: true });
  throw new Error(`${kind} is not a delta kind: its rows are never removed one by one`);
}

/**
 * A history row's records: its close for history.v1 (none for a day that ended without a listing,
 * or one imported for its hours only), and its hours for history-hours.v1 (none without hours).
 */
export function historyRecords(
  market: Market,
  row: RowMap['HISTORY'],
  observedAt: number,
): { point: HistoryPointEvent | undefined; hours: HistoryHoursEvent | undefined } {
  const item = {
    market: market.slug,
    market_hash_name: row.market_hash_name,
    phase: row.phase,
    currency: market.currency,
  };
  return {
    point:
      row.price === null
        ? undefined
        : { ...item, day: row.day, price: row.price, count: row.count, observed_at: observedAt },
    hours:
      row.hours === null || row.hours.length === 0
        ? undefined
        : { ...item, day: row.day, hours: row.hours, observed_at: observedAt },
  };
}
