/**
 * What the route modules share: the read model, the caches of built bodies and answers, and the
 * parameter schemas several endpoints take. app.ts builds one per application.
 */
import type { Market, MarketSlug } from '@skinprices/domain';
import { Type, type TSchema } from 'typebox';
import type { AnswerCache, BodyCache } from '../bodies.js';
import type { CatalogueCache } from '../catalogue-cache.js';
import type { ListBodyCache } from '../list-cache.js';
import type { SharedFieldReads } from '../list-reads.js';
import type { ReadModel } from '../readmodel.js';
import type { Slots } from '../slots.js';
import type { StatusOptions } from '../status.js';

export interface RouteContext {
  read: ReadModel;
  /** Bodies of whole lists, rebuilt when the read-model tags they depend on move (bodyDeps). */
  bodies: BodyCache;
  /** Whole-list bodies patched with the rows changed since their last read (GET /v1/prices/{market}). */
  lists: ListBodyCache;
  /** Small answers (search, history) per request and read-model version. */
  answers: AnswerCache;
  /** Every marketplace's catalogue combined, of the current version. */
  catalogues: CatalogueCache;
  /**
   * Whole-marketplace reads at once (slots.ts), shared with the list bodies' builds. Never around
   * something that takes a slot itself (the catalogue's rebuild reads marketplaces that do): with
   * one slot it would wait for itself.
   */
  wholeReads: Slots;
  /** Liquidity scores moved since a snapshot, one read for every list due at once. */
  scores: SharedFieldReads;
  status?: StatusOptions;
}

/** A path parameter naming one of `markets` (anything else is a 404, see app.ts). */
export const marketPath = (markets: readonly Market[], description?: string) =>
  Type.Unsafe<MarketSlug>({
    type: 'string',
    enum: markets.map((m) => m.slug),
    ...(description ? { description } : {}),
  });

/** `markets`: comma-separated (or repeated) slugs among `markets`; absent means all of them. */
export const marketsQuery = (markets: readonly Market[]): TSchema =>
  Type.Optional(
    Type.Unsafe<string | string[]>({
      anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
      description: `comma-separated marketplace slugs among ${markets.map((m) => m.slug).join(', ')} (default: all of them)`,
    }),
  );

/** An exact item name. */
export const nameQuery = (description = 'exact name') =>
  Type.String({ minLength: 1, maxLength: 300, pattern: '\\S', description });
