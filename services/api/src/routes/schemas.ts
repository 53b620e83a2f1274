/**
 * The JSON schemas of the answers and parameters, one definition each. The route modules hand them
 * to Fastify, which validates requests with them, serialises object answers with them, and
 * publishes them as the OpenAPI document (@fastify/swagger): the document is what the server
 * runs, not a description written beside it. Objects whose shape the spec fixes (or we designed)
 * are closed (`additionalProperties: false`) so a contract check catches any field added or lost.
 *
 * Row shapes that differ per marketplace (CN-A's `price_rmb` and template id, the buy-order rows
 * with a blue price) are built from the marketplace descriptor, so a new marketplace never edits
 * this file.
 */
import { type Market } from '@skinprices/domain';
import { Type, type Static, type TSchema } from 'typebox';
import { API_ERROR_CODES } from '../errors.js';
import { PLANS, type Plan } from '../plans.js';

const DECIMAL_PATTERN = '^-?\\d+(\\.\\d+)?$';
const Dec = Type.String({ pattern: DECIMAL_PATTERN, description: 'decimal string (never a JSON number)' });
/** Type arrays rather than anyOf: fast-json-stringify serialises them without trying branches. */
export const DecOrNull = Type.Unsafe<string | null>({
  type: ['string', 'null'],
  pattern: DECIMAL_PATTERN,
  description: 'decimal string, or null',
});
export const Ts = Type.String({ format: 'date-time', description: 'YYYY-MM-DDTHH:mm:ss.sssZ' });
/**
 * A listing's `updated_at`: when its price or count last changed, as observed upstream — the same
 * instant prices.current.v1 carries — not when it was last seen unchanged (a list's answer header
 * `listings-confirmed-at` tells that).
 */
const ChangedTs = Type.String({
  format: 'date-time',
  description:
    'when the price or count last changed, as observed upstream (YYYY-MM-DDTHH:mm:ss.sssZ); an unchanged row keeps it: the answer header listings-confirmed-at says when the whole list was last confirmed',
});
/**
 * The liquidity score (docs/architecture.md "Derived values"): a daily figure, so a list's rows do not move with
 * every bid the marketplaces re-draw.
 */
const Liquidity = Type.Unsafe<string | null>({
  type: ['string', 'null'],
  pattern: DECIMAL_PATTERN,
  description:
    "0..100 (two decimals), per item across marketplaces, for the current UTC day from the state at its start: 100 × mean of depth n/(n+20) (n: listings at the day before's closes, every marketplace), velocity s/(s+10) (s: sales in the 7 days before; with a sale in 30 days) and spread min(1, best CNY bid held at the day's start / lowest CNY close of the day before); null without a listing at the day before's close, or with neither sales nor a bid. Changes when the day rolls over (00:00 UTC) or late data about the days before arrive.",
});
export const TsOrNull = Type.Unsafe<string | null>({ type: ['string', 'null'], format: 'date-time' });
const Day = Type.String({ format: 'date', description: 'YYYY-MM-DD (UTC)' });
export const IntOrNull = Type.Unsafe<number | null>({ type: ['integer', 'null'] });
const StrOrNull = Type.Unsafe<string | null>({ type: ['string', 'null'] });
const Bit = Type.Unsafe<0 | 1>({ type: 'integer', enum: [0, 1] });
const PlanName = Type.Unsafe<Plan>({ type: 'string', enum: [...PLANS] });

/** Who asked and when: the tail of every answer of ours (spec 2.2). */
export const keyFields = {
  requestor: Type.String({ description: "the key's customer" }),
  plan: PlanName,
  timestamp: Type.String({ format: 'date-time', description: 'when this answer was generated' }),
};

export const closed = <P extends Record<string, TSchema>>(properties: P, description?: string) =>
  Type.Object(properties, { additionalProperties: false, ...(description ? { description } : {}) });

const source = Type.String({ description: "the marketplace's display name" });

/**
 * The per-marketplace envelope of 2.2 around `row`s. `source: 'optional'` for answers that may
 * span marketplaces (then without a source).
 */
export const envelope = (row: TSchema, withSource: 'required' | 'optional' = 'required') =>
  closed({
    data: Type.Array(row),
    source: withSource === 'required' ? source : Type.Optional(source),
    ...keyFields,
  });

/** Alternatives of closed shapes, each once (markets of one shape share it). */
export function oneShapeOf(shapes: readonly TSchema[], description?: string): TSchema {
  const unique = [...new Map(shapes.map((s) => [JSON.stringify(s), s])).values()];
  if (unique.length === 1) return unique[0] as TSchema;
  return Type.Union(unique, description ? { description } : {});
}

// ---- listing rows (2.3, 2.4), search rows and catalogue entries (2.6) ------------------------------

/** A change in percent against the item's last daily close at or before the base day. */
const change = (base: string) =>
  Type.Unsafe<string | null>({
    type: ['string', 'null'],
    pattern: DECIMAL_PATTERN,
    description: `percent change of the price against the item's last daily close at or before ${base} (a day it was not listed counts its last close before it), 2 decimals; null only when it has no close that old`,
  });
/** A mean of daily closes. */
const average = (days: number) =>
  Type.Unsafe<string | null>({
    type: ['string', 'null'],
    pattern: DECIMAL_PATTERN,
    description: `mean of the item's daily closes of the ${days} days before today (days without a close skipped), 2 decimals; null without any`,
  });
const stats = {
  change_24h: change('yesterday'),
  change_7d: change('7 days ago'),
  change_30d: change('30 days ago'),
  change_90d: change('90 days ago'),
  avg_7d: average(7),
  avg_30d: average(30),
  avg_90d: average(90),
};
export type Stats = { [K in keyof typeof stats]: string | null };

/** The outlier guard's verdict (beyond the spec) on catalogue entries and search rows. */
const quality = {
  is_outlier: Type.Unsafe<boolean | null>({
    type: ['boolean', 'null'],
    description:
      "The price is more than 5× away (below a fifth or above five times) from every reference available: the item's median daily close on this marketplace over the 7 days before (at least 3 closes) and the median of its current prices on the other marketplaces of the same currency. False without references; a market-wide move is not an outlier (the peers moved too).",
  }),
  confidence: Type.Unsafe<string | null>({
    type: ['string', 'null'],
    pattern: DECIMAL_PATTERN,
    description:
      '0..1 (two decimals): 0.6 × agreement with the closest reference (1 equal, 0 five times away or more; 0.5 without references) + 0.4 × min(1, count / 5).',
  }),
};

/**
 * A listing row of `market`: 2.3 for a marketplace with its own template id (CN-A: `price_rmb`,
 * the id, no link nor exterior), 2.4 for the others.
 */
export function listingRowSchema(market: Market): TSchema {
  const common = {
    id: Type.Integer(),
    market_hash_name: Type.String(),
    stattrak: Bit,
    souvenir: Bit,
    [market.priceField]: Dec,
    ...stats,
    count: Type.Integer({ description: 'active listings' }),
    phase: Type.String({ description: 'empty when none' }),
    updated_at: ChangedTs,
    liquidity: Liquidity,
  };
  if (market.templateIdField)
    return closed({
      ...common,
      [market.templateIdField]: Type.Unsafe<number | null>({
        type: ['integer', 'null'],
        description: "the marketplace's own template id",
      }),
    });
  return closed({
    ...common,
    item_page_url: Type.Unsafe<string | null>({
      type: ['string', 'null'],
      description: "link to the item's page on that marketplace (phase rows: the name's page)",
    }),
    exterior: StrOrNull,
  });
}

/** A row of the search: the listing row of its marketplace, with `market` and the guard's verdict. */
export function searchRowSchema(market: Market): TSchema {
  const row = listingRowSchema(market) as TSchema & { properties: Record<string, TSchema> };
  return closed({ market: Type.String(), ...row.properties, ...quality });
}

/** One marketplace's object of a catalogue item (2.6). */
function catalogueEntrySchema(market: Market): TSchema {
  return closed({
    [market.priceField]: Dec,
    count: Type.Integer(),
    ...stats,
    liquidity: Liquidity,
    updated_at: ChangedTs,
    phase: Type.String(),
    ...quality,
  });
}

/** `items` of 4.3/4.4: name → marketplace slug → entry. */
export function catalogueAnswer(markets: readonly Market[]) {
  return closed({
    items: Type.Unsafe<Record<string, Record<string, unknown>>>({
      type: 'object',
      description: 'market_hash_name (phase items: "<name> (<phase>)") → marketplace slug → entry',
      additionalProperties: {
        type: 'object',
        propertyNames: { enum: markets.map((m) => m.slug) },
        additionalProperties: oneShapeOf(markets.map(catalogueEntrySchema)),
      },
    }),
    ...keyFields,
  });
}

// ---- buy orders (2.5), float buy orders, float-ranged, the store --------------------------------

export function buyorderRowSchema(market: Market): TSchema {
  return closed({
    id: Type.Integer(),
    market_hash_name: Type.String({ description: 'phase and tier rows carry the suffix " (<label>)"' }),
    templateId: IntOrNull,
    buyorder_price: DecOrNull,
    ...(market.blueBuyorderPrice
      ? {
          blue_buyorder_price: Type.Unsafe<string | null>({
            type: ['string', 'null'],
            pattern: DECIMAL_PATTERN,
            description:
              "The marketplace's separate blue buy-order price, passed through as quoted; null when it has none for the item (never copied from buyorder_price).",
          }),
        }
      : {}),
    phase: Type.String({ description: 'phase or tier label' }),
    typeId: Type.Unsafe<number | null>({
      type: ['integer', 'null'],
      description: 'CN-A: its type id. CN-B: the phase or tier tag id; 0 for a general order.',
    }),
    updated_at: Ts,
    count: Type.Integer(),
  });
}

const range = (bound: TSchema) => closed({ min: bound, max: bound });

export const FloatBuyorderRow = closed({
  order_id: Type.String(),
  market_hash_name: Type.String(),
  phase: Type.String(),
  price: Dec,
  quantity: Type.Integer(),
  float_range: range(DecOrNull),
  condition: Type.Unsafe<string | null>({ type: ['string', 'null'], description: 'fade or pattern-tier condition' }),
  updated_at: Ts,
});
export type FloatBuyorderRow = Static<typeof FloatBuyorderRow>;

export const FloatRangedRow = closed({
  market: Type.String(),
  market_hash_name: Type.String(),
  phase: Type.String(),
  float_range: range(Dec),
  first_price: DecOrNull,
  fifth_price: DecOrNull,
  count: Type.Integer(),
  phase_labels: Type.Record(Type.String(), Type.String(), { description: 'language → phase label' }),
  updated_at: Ts,
});
export type FloatRangedRow = Static<typeof FloatRangedRow>;

const Level = closed({ price: Dec, count: Type.Integer() });
export const StoreRow = closed({
  market_hash_name: Type.String(),
  phase: Type.String(),
  price: DecOrNull,
  count: Type.Integer(),
  change_24h: DecOrNull,
  change_7d: DecOrNull,
  updated_at: TsOrNull,
  order_book: Type.Unsafe<{ asks: unknown[]; bids: unknown[]; updated_at: string | null } | null>({
    anyOf: [closed({ asks: Type.Array(Level), bids: Type.Array(Level), updated_at: TsOrNull }), { type: 'null' }],
  }),
});
export type StoreRow = Static<typeof StoreRow>;

// ---- history, sales, market cap ----------------------------------------------------------------------

const candle = {
  price: DecOrNull,
  count: IntOrNull,
  open: Type.Unsafe<string | null>({
    type: ['string', 'null'],
    pattern: DECIMAL_PATTERN,
    description:
      'price of the first priced observation of the bucket; null if none was priced, for imported closes and for buckets stored before candles were recorded',
  }),
  high: DecOrNull,
  low: DecOrNull,
  close: Type.Unsafe<string | null>({
    type: ['string', 'null'],
    pattern: DECIMAL_PATTERN,
    description: 'price of the last observation of the hour, or of the last priced one of the day; equals price',
  }),
};
export const DailyPoint = closed({ date: Day, ...candle });
export const HourlyPoint = closed({ time: Ts, ...candle });
export type HistoryPoint = Static<typeof DailyPoint> | Static<typeof HourlyPoint>;

export const Sale = closed({
  market: Type.String(),
  sale_id: Type.String(),
  market_hash_name: Type.String(),
  phase: Type.String(),
  currency: Type.String(),
  price: Dec,
  sold_at: Ts,
  float_value: DecOrNull,
  paint_index: IntOrNull,
  paint_seed: IntOrNull,
  stickers: Type.Array(closed({ slot: Type.Integer(), name: Type.String(), wear: DecOrNull })),
  keychains: Type.Array(closed({ slot: Type.Integer(), name: Type.String(), pattern: IntOrNull })),
});
export type Sale = Static<typeof Sale>;

const capPoint = { market_cap_rmb: Dec, items: Type.Integer(), cleaned: Type.Boolean() };
export const DailyCapPoint = closed({ date: Day, ...capPoint });
export const HourlyCapPoint = closed({ time: Ts, ...capPoint });
export type CapPoint = Static<typeof DailyCapPoint> | Static<typeof HourlyCapPoint>;

// ---- errors ----------------------------------------------------------------------------------------------

const ErrorBody = closed({
  error: closed({
    status: Type.Integer(),
    code: Type.Unsafe<string>({ type: 'string', enum: [...API_ERROR_CODES] }),
    message: Type.String(),
  }),
});

/** Statuses every keyed endpoint can answer, with what they mean. */
const COMMON_ERRORS: Record<number, string> = {
  400: 'bad parameter or body (the message names it; NUL bytes and JSON deeper than 32 levels included), or malformed HTTP',
  401: 'key missing, invalid, disabled or expired',
  403: 'plan or endpoint ACL does not include this endpoint',
  404: 'unknown marketplace or route',
  405: 'method not allowed; Allow lists the methods',
  408: 'the request was not received in time',
  414: 'a path segment over 100 characters',
  417: 'an Expect header other than 100-continue',
  429: 'rate limit exceeded (rate_limited), or too many failed authentications from this address (auth_rate_limited); Retry-After says when to retry',
  431: 'request line and headers over 16 KiB',
  500: 'internal error',
  503: 'read model not built yet, or the database unavailable; Retry-After says when to retry',
};
const BODY_ERRORS: Record<number, string> = {
  413: 'body over 64 KiB',
  415: 'body not application/json',
};

export interface ResponseSpec {
  /** The success answer's schema (JSON) or, with `okType`, its media type's schema; none for a 204. */
  ok: TSchema | null;
  /** The success status: 201 created, 202 accepted, 204 done and nothing to say. @default 200 */
  okStatus?: 200 | 201 | 202 | 204;
  okType?: string;
  okDescription?: string;
  /** The answer can be a 304 to If-None-Match (cached bodies with an ETag). */
  etag?: boolean;
  /** The route takes a JSON body (413, 415). */
  body?: boolean;
  /** Statuses beyond the common ones, or common ones with a more precise description. */
  more?: Record<number, string>;
  /** Headers of the 200 answer beyond the common ones, by name: what each tells. */
  okHeaders?: Record<string, string>;
}

/** Fastify's `schema.response`: every status the route can answer, each with its body. */
export function responses(spec: ResponseSpec): Record<string, unknown> {
  const errors = { ...COMMON_ERRORS, ...(spec.body ? BODY_ERRORS : {}), ...spec.more };
  return {
    [spec.okStatus ?? 200]: {
      description: spec.okDescription ?? 'OK',
      ...(spec.okHeaders
        ? {
            headers: Object.fromEntries(
              Object.entries(spec.okHeaders).map(([name, description]) => [
                name,
                { description, schema: { type: 'string', format: 'date-time' } },
              ]),
            ),
          }
        : {}),
      // `type: 'null'` is how @fastify/swagger writes a response without a body (as the 304 below).
      ...(spec.ok === null
        ? { type: 'null' }
        : { content: { [spec.okType ?? 'application/json']: { schema: spec.ok } } }),
    },
    ...(spec.etag
      ? { 304: { description: 'Not Modified: the ETag sent in If-None-Match still matches', type: 'null' } }
      : {}),
    ...Object.fromEntries(
      Object.entries(errors).map(([status, description]) => [
        status,
        { description, content: { 'application/json': { schema: ErrorBody } } },
      ]),
    ),
  };
}
