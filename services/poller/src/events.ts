/**
 * Rows → events: the envelope fields every event carries, the removal a delta kind sends for a
 * row that is gone, and a row's identity within a cycle. What each kind is (its event, mode and
 * identity) comes from the domain's descriptor (packages/domain kinds.ts).
 */
import { DATA_KINDS, itemPageUrl, rowIdentity, type DataKindInfo, type Market } from '@skinprices/domain';
import type { EventKind, EventMap } from '@skinprices/events';
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
  const base = { market: market.slug, currency: market.currency, observed_at: observedAt };
  // Happenings (sales, history points) are not cycle states: they carry no cycle id.
  if (DATA_KINDS[kind].mode === 'append') return { ...base, ...row } as EventMap[EventKind];
  const info: DataKindInfo = DATA_KINDS[kind];
  if (info.linksItemPage) {
    const listing = row as RowMap['LISTINGS'];
    // The spec promises a link on every listing row: the upstream's own wins, else the registry's template.
    const url =
      listing.item_page_url ??
      itemPageUrl(market, { market_hash_name: listing.market_hash_name, id: listing.template_id });
    return { ...base, ...listing, item_page_url: url, cycle_id: cycleId } as EventMap[EventKind];
  }
  return { ...base, ...row, cycle_id: cycleId } as EventMap[EventKind];
}

/** The row saying "this one is gone" for delta kinds: the row with the descriptor's `cleared` values. */
export function removalOf<K extends Kind>(kind: K, row: RowMap[K]): RowMap[K] {
  const { cleared }: DataKindInfo = DATA_KINDS[kind];
  if (cleared === undefined) throw new Error(`${kind} is not a delta kind: its rows are never removed one by one`);
  return { ...row, ...cleared };
}
