/**
 * The OpenAPI 3.1 document (GET /openapi.json, rendered interactively at GET /docs by
 * pages/reference.ts) and a static table of the endpoints (GET /docs/plain), all without a key.
 * Shapes the spec leaves open ("not shown") are designed here and published as such.
 */
import { ENDPOINTS, planFor, type EndpointId } from './plans.js';

const dec = { type: 'string', pattern: '^-?\\d+(\\.\\d+)?$', description: 'decimal string (never a JSON number)' };
const decOrNull = { oneOf: [dec, { type: 'null' }] };
const ts = { type: 'string', format: 'date-time', description: 'YYYY-MM-DDTHH:mm:ss.sssZ' };
const envelope = (row: object) => ({
  type: 'object',
  required: ['data', 'requestor', 'plan', 'timestamp'],
  properties: {
    data: { type: 'array', items: row },
    source: { type: 'string' },
    requestor: { type: 'string' },
    plan: { enum: ['basic', 'pro', 'enterprise'] },
    timestamp: ts,
  },
});
const stats = {
  change_24h: decOrNull,
  change_7d: decOrNull,
  change_30d: decOrNull,
  change_90d: decOrNull,
  avg_7d: decOrNull,
  avg_30d: decOrNull,
  avg_90d: decOrNull,
};
const listingRow = {
  type: 'object',
  description: 'CN-A rows carry price_rmb and cn_a_template_id; the others price, exterior and item_page_url.',
  properties: {
    id: { type: 'integer' },
    market_hash_name: { type: 'string' },
    stattrak: { enum: [0, 1] },
    souvenir: { enum: [0, 1] },
    price_rmb: dec,
    price: dec,
    ...stats,
    count: { type: 'integer' },
    phase: { type: 'string' },
    exterior: { type: ['string', 'null'] },
    item_page_url: {
      type: ['string', 'null'],
      description: "Link to the item's page on that marketplace, from its URL template (phase rows: the name's page).",
    },
    cn_a_template_id: { type: ['integer', 'null'] },
    updated_at: ts,
    liquidity: decOrNull,
  },
};
/** The outlier guard's fields (beyond the spec) on catalogue entries and search rows. */
const quality = {
  is_outlier: {
    type: ['boolean', 'null'],
    description:
      "The price is more than 5× away (below a fifth or above five times) from every reference available: the item's median daily close on this marketplace over the 7 days before (at least 3 closes) and the median of its current prices on the other marketplaces of the same currency. False without references; a market-wide move is not an outlier (the peers moved too). Judged when the price is committed and again when any marketplace's listings cycle touching the item ends.",
  },
  confidence: {
    ...decOrNull,
    description:
      '0..1 (two decimals): 0.6 × agreement with the closest reference (1 equal, 0 five times away or more; 0.5 without references) + 0.4 × min(1, count / 5).',
  },
};
/** One marketplace's object of a catalogue item (spec 2.6). */
const catalogueEntry = {
  type: 'object',
  description: 'CN-A carries price_rmb, the others price.',
  properties: {
    price_rmb: dec,
    price: dec,
    count: { type: 'integer' },
    ...stats,
    liquidity: decOrNull,
    updated_at: ts,
    phase: { type: 'string' },
    ...quality,
  },
};
const error = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      required: ['status', 'code', 'message'],
      properties: { status: { type: 'integer' }, code: { type: 'string' }, message: { type: 'string' } },
    },
  },
};

/** A time series: daily points carry `date`, hourly ones `time`. */
const points = (props: object) => ({
  type: 'array',
  items: { type: 'object', properties: { date: { type: 'string', format: 'date' }, time: ts, ...props } },
});
/** One level of an order book. */
const level = { type: 'object', properties: { price: dec, count: { type: 'integer' } } };

const q = (name: string, description: string, required = false, schema: object = { type: 'string' }) => ({
  name,
  in: 'query',
  required,
  description,
  schema,
});
const marketPath = { name: 'market', in: 'path', required: true, schema: { type: 'string' } };

/** One committed change of the change feed and stream. */
const change = {
  type: 'object',
  additionalProperties: false,
  required: [
    'cursor',
    'market',
    'market_hash_name',
    'phase',
    'currency',
    'old_price',
    'new_price',
    'old_count',
    'new_count',
    'observed_at',
    'changed_at',
  ],
  properties: {
    cursor: {
      type: 'string',
      description: 'opaque; continue after this change with since=<cursor> (or Last-Event-ID)',
    },
    market: { type: 'string' },
    market_hash_name: { type: 'string' },
    phase: { type: 'string' },
    currency: { enum: ['CNY', 'EUR', 'USD'] },
    old_price: { ...decOrNull, description: 'null: the item had no listing (or was new)' },
    new_price: { ...decOrNull, description: 'null: the item has no listing any more' },
    old_count: { type: ['integer', 'null'] },
    new_count: { type: ['integer', 'null'] },
    observed_at: { ...ts, description: "when the marketplace showed the new state (the upstream's clock)" },
    changed_at: { ...ts, description: 'when the read model committed the change' },
  },
};
const cursorParams = (since: string) => [
  q(
    'since',
    `${since}; 'now': only changes from now on; otherwise a cursor from an earlier answer (a cursor older than the log's retention, 7 days by default, or of a rebuilt log is 410 cursor_expired)`,
  ),
  q('markets', 'comma-separated marketplace slugs (default: every listing marketplace)'),
];

const OPS: Record<
  EndpointId,
  {
    summary: string;
    parameters?: object[];
    body?: object;
    ok: object;
    okType?: string;
    /** Statuses beyond the common ones. */
    more?: [string, string][];
  }
> = {
  'GET /v1/prices/{market}': {
    summary: 'Lowest listing per item of one marketplace (cn-a, cn-b, cn-c, cn-d, eu-a, eu-b)',
    parameters: [marketPath],
    ok: envelope(listingRow),
  },
  'GET /v1/prices/{market}/buyorder': {
    summary: 'Highest buy orders (cn-a every ~30 min, cn-b every ~10 min); phase and tier rows carry the suffix',
    parameters: [marketPath],
    ok: envelope({
      type: 'object',
      properties: {
        id: { type: 'integer' },
        market_hash_name: { type: 'string' },
        templateId: { type: ['integer', 'null'] },
        buyorder_price: decOrNull,
        blue_buyorder_price: {
          ...decOrNull,
          description:
            "CN-A only. CN-A's separate blue buy-order price, passed through as CN-A quotes it; CN-A quotes one for some items only, null when it has none for the item (never copied from buyorder_price).",
        },
        phase: { type: 'string' },
        typeId: {
          type: ['integer', 'null'],
          description:
            'CN-A: its type id. CN-B: the phase or tier tag id; 0 for a general order (no phase or tier condition).',
        },
        updated_at: ts,
        count: { type: 'integer' },
      },
    }),
  },
  'GET /v1/prices/latest': {
    summary:
      'The whole catalogue: items keyed by market_hash_name (phase items: "<name> (<phase>)"), then by marketplace',
    parameters: [q('markets', 'comma-separated marketplace slugs')],
    ok: {
      type: 'object',
      properties: {
        items: {
          type: 'object',
          description: 'market_hash_name (phase items: "<name> (<phase>)") → marketplace slug → entry',
          additionalProperties: { type: 'object', additionalProperties: catalogueEntry },
        },
        requestor: { type: 'string' },
        plan: { type: 'string' },
        timestamp: ts,
      },
    },
  },
  'POST /v1/prices/latest': {
    summary: 'The catalogue restricted to at most 100 items',
    body: {
      type: 'object',
      required: ['items'],
      properties: {
        items: { type: 'array', maxItems: 100, items: { type: 'string' } },
        markets: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
      },
    },
    ok: {
      type: 'object',
      properties: {
        items: { type: 'object', additionalProperties: { type: 'object', additionalProperties: catalogueEntry } },
      },
    },
  },
  'GET /v1/prices/search': {
    summary: 'One item on every marketplace: one row per marketplace and phase',
    parameters: [q('market_hash_name', 'exact name', true), q('markets', 'comma-separated slugs')],
    ok: {
      type: 'object',
      properties: {
        market_hash_name: { type: 'string' },
        data: {
          type: 'array',
          items: {
            ...listingRow,
            properties: { market: { type: 'string' }, ...listingRow.properties, ...quality },
          },
        },
      },
    },
  },
  'GET /v1/prices/{market}/history': {
    summary:
      'Listing price history: daily closes (all stored) or hourly snapshots (~100 days); missing days are missing',
    parameters: [
      marketPath,
      q('market_hash_name', 'exact name', true),
      q('phase', 'phase of a phase item (default none)'),
      q('resolution', 'daily (default) or hourly', false, { enum: ['daily', 'hourly'] }),
    ],
    ok: {
      type: 'object',
      properties: {
        market: { type: 'string' },
        currency: { type: 'string' },
        resolution: { type: 'string' },
        points: points({
          price: decOrNull,
          count: { type: ['integer', 'null'] },
          // Candles: a bucket's open, high, low and close from every observation of it.
          open: {
            ...decOrNull,
            description:
              'price of the first priced observation of the day or hour; null if none was priced, for the history-only marketplace (it imports closes only) and for buckets stored before candles were recorded',
          },
          high: { ...decOrNull, description: 'highest price observed in the day or hour; null as open' },
          low: { ...decOrNull, description: 'lowest price observed in the day or hour; null as open' },
          close: {
            ...decOrNull,
            description:
              'price of the last observation of the hour (null: not listed then), or of the last priced one of the day; equals price',
          },
        }),
      },
    },
  },
  'GET /v1/{store_market}': {
    summary: 'The first-party store (slug "store"): prices and the order book',
    parameters: [
      { name: 'store_market', in: 'path', required: true, schema: { const: 'store' } },
      q('market_hash_name', 'one item'),
    ],
    ok: envelope({
      type: 'object',
      properties: {
        market_hash_name: { type: 'string' },
        price: decOrNull,
        count: { type: 'integer' },
        change_24h: decOrNull,
        change_7d: decOrNull,
        phase: { type: 'string' },
        updated_at: ts,
        order_book: {
          type: ['object', 'null'],
          properties: {
            asks: { type: 'array', items: level },
            bids: { type: 'array', items: level },
          },
        },
      },
    }),
  },
  'GET /v2/prices/float-ranged': {
    summary: 'Float-range offers: first and fifth listing price and count per float bucket, phase translations',
    parameters: [q('market', 'one marketplace slug (cn-a, cn-b, cn-c)')],
    ok: envelope({
      type: 'object',
      properties: {
        market: { type: 'string' },
        market_hash_name: { type: 'string' },
        phase: { type: 'string' },
        float_range: { type: 'object', properties: { min: dec, max: dec } },
        first_price: decOrNull,
        fifth_price: decOrNull,
        count: { type: 'integer' },
        phase_labels: { type: 'object', additionalProperties: { type: 'string' } },
        updated_at: ts,
      },
    }),
  },
  'GET /v1/prices/{market}/float-buyorder': {
    summary: 'Float buy orders: cn-a every individual order (enterprise), cn-b orders per float range (pro)',
    parameters: [
      marketPath,
      q('market_hash_name', 'one item'),
      q('float', 'exact float value: orders whose range holds it'),
    ],
    ok: envelope({
      type: 'object',
      properties: {
        order_id: { type: 'string' },
        market_hash_name: { type: 'string' },
        phase: { type: 'string' },
        price: dec,
        quantity: { type: 'integer' },
        float_range: { type: 'object', properties: { min: decOrNull, max: decOrNull } },
        condition: { type: ['string', 'null'], description: 'fade or pattern-tier condition' },
        updated_at: ts,
      },
    }),
  },
  'GET /v1/market-sales/search': {
    summary: 'Completed sales of one item in the last 72 hours (cn-a, cn-b, usd-1)',
    parameters: [q('market_hash_name', 'exact name', true), q('markets', 'comma-separated slugs')],
    ok: {
      type: 'object',
      properties: {
        data: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              market: { type: 'string' },
              sale_id: { type: 'string' },
              market_hash_name: { type: 'string' },
              phase: { type: 'string' },
              currency: { type: 'string' },
              price: dec,
              sold_at: ts,
              float_value: decOrNull,
              paint_index: { type: ['integer', 'null'] },
              paint_seed: { type: ['integer', 'null'] },
              stickers: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { slot: { type: 'integer' }, name: { type: 'string' }, wear: decOrNull },
                },
              },
              keychains: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    slot: { type: 'integer' },
                    name: { type: 'string' },
                    pattern: { type: ['integer', 'null'] },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
  'GET /v1/market-sales/export': {
    summary:
      'ZIP of the last 24 h of sales: sales.csv (market, sale_id, market_hash_name, phase, currency, price, sold_at, float_value, paint_index, paint_seed, sticker_count, keychain_count), stickers.csv (market, sale_id, slot, sticker_name, wear), keychains.csv (market, sale_id, slot, keychain_name, pattern)',
    ok: { type: 'string', contentMediaType: 'application/zip' },
    okType: 'application/zip',
  },
  'GET /v1/indexes/market-cap': {
    summary:
      'CN-A market cap: Σ price × count over the cleaned catalogue (0 < price < 1,000,000 CNY, count ≥ 2, catalogue items, not an outlier by the guard as of that hour: see is_outlier on the catalogue)',
    parameters: [
      q('resolution', 'daily (default) or hourly', false, { enum: ['daily', 'hourly'] }),
      q('days', 'daily look-back, clamped to 7..365 (default 30)', false, { type: 'integer' }),
      q('hours', 'hourly look-back, clamped to 12..168 (default 48)', false, { type: 'integer' }),
    ],
    ok: {
      type: 'object',
      properties: {
        points: points({ market_cap_rmb: dec, items: { type: 'integer' }, cleaned: { type: 'boolean' } }),
      },
    },
  },
  'GET /v1/prices/changes': {
    summary:
      'Committed price and count changes in commit order, a page at a time: the same changes as the Kafka topic price-changes.v1. Continue with since=next_cursor; every change is seen exactly once, none is skipped',
    parameters: [
      ...cursorParams('absent: from the oldest change the log keeps'),
      q('limit', 'changes per page, 1..1000 (default 500)', false, { type: 'integer' }),
    ],
    ok: {
      type: 'object',
      additionalProperties: false,
      required: ['data', 'next_cursor', 'has_more', 'requestor', 'plan', 'timestamp'],
      properties: {
        data: { type: 'array', items: change },
        next_cursor: { type: 'string', description: 'where the next page starts (also when this one is empty)' },
        has_more: { type: 'boolean', description: 'the page was full: ask again at once' },
        requestor: { type: 'string' },
        plan: { enum: ['basic', 'pro', 'enterprise'] },
        timestamp: ts,
      },
    },
    more: [['410', 'cursor_expired: the cursor is older than the retention, or of a change log rebuilt since']],
  },
  'GET /v1/prices/stream': {
    summary:
      "Server-Sent Events of the same changes as GET /v1/prices/changes, live: each event is 'change' with id = the change's cursor and data = the change as JSON. Reconnect with Last-Event-ID (EventSource does) to continue exactly after the last event seen. Comment lines keep an idle stream open; an 'error' event ends it (410 cursor_expired, 503). Open streams per key: pro 2, enterprise 10",
    parameters: [
      ...cursorParams('absent: from now (Last-Event-ID, when sent, wins)'),
      {
        name: 'Last-Event-ID',
        in: 'header',
        required: false,
        schema: { type: 'string' },
        description: 'the id of the last event received',
      },
    ],
    ok: {
      type: 'string',
      description: "text/event-stream: 'id: <cursor>\\nevent: change\\ndata: <change JSON>\\n\\n' per change",
    },
    okType: 'text/event-stream',
    more: [
      ['410', 'cursor_expired: the cursor is older than the retention, or of a change log rebuilt since'],
      ['429', "rate_limited, auth_rate_limited, or too_many_streams: the key has all its plan's streams open"],
    ],
  },
  'GET /v1/status': {
    summary:
      "Is the data fresh and the pipeline alive: per marketplace and kind the age of the last complete cycle on the wall clock and a stale flag (2 × the kind's refresh interval + grace); materializer heartbeats, lag and dead letters",
    ok: {
      type: 'object',
      required: ['status', 'now', 'pipeline', 'dead_letters', 'markets', 'requestor', 'plan', 'timestamp'],
      properties: {
        status: { enum: ['ok', 'degraded'] },
        now: ts,
        data_time: { oneOf: [ts, { type: 'null' }] },
        pipeline: {
          type: 'object',
          properties: {
            status: { enum: ['ok', 'stalled', 'down'] },
            problems: { type: 'array', items: { type: 'string' } },
            lag: { type: ['integer', 'null'] },
            last_batch_at: { oneOf: [ts, { type: 'null' }] },
            materializers: { type: 'array', items: { type: 'object' } },
          },
        },
        dead_letters: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              topic: { type: 'string' },
              reason: { enum: ['decode', 'sql'] },
              count: { type: 'integer' },
              last_at: ts,
            },
          },
        },
        stale_count: { type: 'integer' },
        markets: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              market: { type: 'string' },
              kind: { type: 'string' },
              refresh_interval_seconds: { type: 'integer' },
              stale_after_seconds: { type: 'integer' },
              last_outcome: { enum: ['COMPLETE', 'PARTIAL', 'FAILED'] },
              last_cycle_at: ts,
              last_complete_at: { oneOf: [ts, { type: 'null' }] },
              last_applied_at: { oneOf: [ts, { type: 'null' }] },
              last_complete_applied_at: { oneOf: [ts, { type: 'null' }] },
              age_seconds: { type: ['integer', 'null'] },
              stale: { type: 'boolean' },
              failed_in_a_row: { type: 'integer' },
            },
          },
        },
        requestor: { type: 'string' },
        plan: { enum: ['basic', 'pro', 'enterprise'] },
        timestamp: ts,
      },
    },
  },
};

export function openApiDocument(): object {
  const paths: Record<string, Record<string, object>> = {};
  for (const id of Object.keys(ENDPOINTS) as EndpointId[]) {
    const [method, path] = id.split(' ') as [string, string];
    const op = OPS[id];
    const plan = planFor(id);
    (paths[path] ??= {})[method.toLowerCase()] = {
      summary: op.summary,
      description: `Plan: ${id === 'GET /v1/prices/{market}/float-buyorder' ? 'pro (cn-b), enterprise (cn-a)' : plan}.`,
      'x-plan': plan,
      parameters: op.parameters ?? [],
      ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: op.body } } } } : {}),
      responses: {
        '200': { description: 'OK', content: { [op.okType ?? 'application/json']: { schema: op.ok } } },
        ...Object.fromEntries(
          [
            [
              '400',
              'bad parameter or body (the message names it; NUL bytes and JSON deeper than 32 levels included), or malformed HTTP',
            ],
            ['401', 'key missing, invalid, disabled or expired'],
            ['403', 'plan or endpoint ACL does not include this endpoint'],
            [
              '404',
              id === 'GET /v1/prices/{market}/history'
                ? 'unknown marketplace or route, or an item never listed nor imported (an item that was, but has no points here, is a 200 with no points)'
                : 'unknown marketplace or route',
            ],
            ['405', 'method not allowed; Allow lists the methods'],
            ...(op.body
              ? [
                  ['413', 'body over 64 KiB'],
                  ['415', 'body not application/json'],
                ]
              : []),
            ['414', 'a path segment over 100 characters'],
            ['417', 'an Expect header other than 100-continue'],
            [
              '429',
              'rate limit exceeded (rate_limited), or too many failed authentications from this address (auth_rate_limited); Retry-After says when to retry',
            ],
            ['431', 'request line and headers over 16 KiB'],
            ['500', 'internal error'],
            ['503', 'read model not built yet, or the database unavailable; Retry-After says when to retry'],
            ...(op.more ?? []),
          ].map(([code, description]) => [code, { description, content: { 'application/json': { schema: error } } }]),
        ),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Game-item price data service', version: '1.3.1' },
    servers: [{ url: '/' }],
    security: [{ ApiKeyAuth: [] }, { BearerAuth: [] }],
    components: {
      securitySchemes: {
        ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        BearerAuth: { type: 'http', scheme: 'bearer' },
      },
    },
    paths,
  };
}

export function docsPage(): string {
  const rows = (Object.keys(ENDPOINTS) as EndpointId[])
    .map((id) => `<tr><td><code>${id}</code></td><td>${ENDPOINTS[id]}</td><td>${OPS[id].summary}</td></tr>`)
    .join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>Price data service</title>
<style>body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem}td{padding:.3rem .6rem;vertical-align:top;border-bottom:1px solid #ddd}</style>
</head><body><h1>Game-item price data service (v1.3.1)</h1>
<p>Send your key as <code>x-api-key: &lt;key&gt;</code> or <code>Authorization: Bearer &lt;key&gt;</code>.
Prices are decimal strings in each marketplace's own currency; a missing price is null or absent, never zero.
10 requests per second per key (429 with <code>Retry-After</code>), plus per-minute and per-day limits.
Errors: <code>{"error":{"status":403,"code":"plan_required","message":"…"}}</code>.
Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
<table><tr><th>endpoint</th><th>plan</th><th>what</th></tr>${rows}</table></body></html>`;
}
