/**
 * One full listings snapshot of a marketplace as the pollers would emit it, taken straight from
 * the simulator's model (no HTTP): the benchmarks' input data.
 */
import { exteriorOfName, flagsOfName, type Market } from '@skinprices/domain';
import type { ConsumedBatch, ListingEvent } from '@skinprices/events';
import type { MaterializedKind } from '@skinprices/materializer';
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

/**
 * A consumed batch of listing events as the materializer's consumer hands it over: one partition,
 * offsets from `firstOffset`, keys as the pollers send them, the high watermark just past it.
 */
export function listingBatch(
  topic: string,
  partition: number,
  firstOffset: number,
  events: readonly ListingEvent[],
): ConsumedBatch<MaterializedKind> {
  return {
    topic,
    partition,
    messages: events.map((value, i) => ({
      topic,
      partition,
      offset: String(firstOffset + i),
      key: `${value.market}|${value.market_hash_name}|${value.phase}`,
      value,
    })),
    highWatermark: String(firstOffset + events.length),
  };
}
