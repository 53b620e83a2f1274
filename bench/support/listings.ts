/**
 * One full listings snapshot of a marketplace as the pollers would emit it, taken straight from
 * the simulator's model (no HTTP): the benchmarks' input data.
 */
import { exteriorOfName, flagsOfName, type Market } from '@skinprices/domain';
import type { ListingEvent } from '@skinprices/events';
import { formatMinor, type MarketModel } from '@skinprices/simulator';

export function snapshotListings(model: MarketModel, market: Market, at: number, cycleId: string): ListingEvent[] {
  return model.listings(market.slug, at).map((l) => {
    const flags = flagsOfName(l.item.marketHashName);
    return {
      market: market.slug,
      market_hash_name: l.item.marketHashName,
      phase: l.item.phase,
      currency: market.currency,
      price: l.priceMinor === null ? null : formatMinor(l.priceMinor),
      count: l.priceMinor === null ? 0 : l.count,
      exterior: exteriorOfName(l.item.marketHashName),
      stattrak: flags.stattrak === 1,
      souvenir: flags.souvenir === 1,
      template_id: l.item.index,
      item_page_url: null,
      observed_at: at,
      cycle_id: cycleId,
    };
  });
}
