/**
 * Following price changes over HTTP, for customers without a Kafka client: pages of committed
 * changes behind a cursor (GET /v1/prices/changes) and a Server-Sent Events stream of the same
 * (GET /v1/prices/stream, resumable with Last-Event-ID). Both read the committed-change log that
 * feeds price-changes.v1, numbered in commit order, so a subscriber that continues from its
 * cursor sees every change exactly once: none skipped, none twice.
 */
import { once } from 'node:events';
import { type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ApiError, badParameter } from '../errors.js';
import type { ApiKey } from '../keys.js';
import { parseMarkets } from '../params.js';
import { marketsQuery } from '../routes/context.js';
import { LISTING_MARKETS, slugs } from '../routes/exposure.js';
import { closed, DecOrNull, IntOrNull, keyFields, responses, Ts } from '../routes/schemas.js';
import { formatCursor, parseCursor, startAfter } from './cursor.js';
import type { ChangeLog, ChangeRow, LogState } from './log.js';
import { StreamSlots, type ChangeWaker, type StreamSlotCounter } from './waker.js';

/** Marketplaces whose listing changes are logged. */
const FEED_MARKETS: readonly MarketSlug[] = slugs(LISTING_MARKETS);

/** One committed change of the feed and the stream. */
const Change = closed({
  cursor: Type.String({ description: 'opaque; continue after this change with since=<cursor> (or Last-Event-ID)' }),
  market: Type.String(),
  market_hash_name: Type.String(),
  phase: Type.String(),
  currency: Type.Unsafe<string>({ type: 'string', enum: ['CNY', 'EUR', 'USD'] }),
  old_price: { ...DecOrNull, description: 'null: the item had no listing (or was new)' },
  new_price: { ...DecOrNull, description: 'null: the item has no listing any more' },
  old_count: IntOrNull,
  new_count: IntOrNull,
  observed_at: { ...Ts, description: "when the marketplace showed the new state (the upstream's clock)" },
  changed_at: { ...Ts, description: 'when the read model committed the change' },
});
const since = (absent: string) =>
  Type.Optional(
    Type.String({
      description: `${absent}; 'now': only changes from now on; otherwise a cursor from an earlier answer (a cursor older than the log's retention, 7 days by default, or of a rebuilt log is 410 cursor_expired)`,
    }),
  );
const EXPIRED = 'cursor_expired: the cursor is older than the retention, or of a change log rebuilt since';
type FeedQuery = { since?: string; markets?: string | string[]; limit?: number };

const CHANGES = {
  summary:
    'Committed price and count changes in commit order, a page at a time: the same changes as the Kafka topic price-changes.v1. Continue with since=next_cursor; every change is seen exactly once, none is skipped',
  querystring: Type.Object({
    since: since('absent: from the oldest change the log keeps'),
    markets: marketsQuery(LISTING_MARKETS),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 500, description: 'changes per page (default 500)' }),
    ),
  }),
  response: responses({
    ok: closed({
      data: Type.Array(Change),
      next_cursor: Type.String({ description: 'where the next page starts (also when this one is empty)' }),
      has_more: Type.Boolean({ description: 'the page was full: ask again at once' }),
      ...keyFields,
    }),
    more: { 410: EXPIRED },
  }),
};
const STREAM = {
  summary:
    "Server-Sent Events of the same changes as GET /v1/prices/changes, live: each event is 'change' with id = the change's cursor and data = the change as JSON. Reconnect with Last-Event-ID (EventSource does) to continue exactly after the last event seen. Comment lines keep an idle stream open; an 'error' event ends it (410 cursor_expired, 503). Open streams per key: pro 2, enterprise 10",
  querystring: Type.Object({
    since: since('absent: from now (Last-Event-ID, when sent, wins)'),
    markets: marketsQuery(LISTING_MARKETS),
  }),
  headers: Type.Object({
    'last-event-id': Type.Optional(Type.String({ description: 'the id of the last event received' })),
  }),
  response: responses({
    ok: Type.String({
      description: "'id: <cursor>\\nevent: change\\ndata: <change JSON>\\n\\n' per change",
    }),
    okType: 'text/event-stream',
    more: {
      410: EXPIRED,
      429: "rate_limited, auth_rate_limited, or too_many_streams: the key has all its plan's streams open",
    },
  }),
};

/** Open streams a key may hold per plan (the stream needs pro). */
const STREAMS_PER_KEY: Record<string, number> = { basic: 0, pro: 2, enterprise: 10 };

export interface ChangeRouteOptions {
  log: ChangeLog;
  waker: ChangeWaker;
  /** Longest wait for a notification before a stream looks at the log anyway. @default 5000 */
  pollMs?: number;
  /** A comment line keeps idle streams open through proxies. @default 15000 */
  keepAliveMs?: number;
  /** Open streams per key. @default this process's (StreamSlots); a cluster worker's: the machine's */
  slots?: StreamSlotCounter;
}

/** One change as customers see it; `cursor` continues after it. */
function changeJson(epoch: string, r: ChangeRow): Record<string, unknown> {
  return {
    cursor: formatCursor(epoch, BigInt(r.seq)),
    market: r.market,
    market_hash_name: r.market_hash_name,
    phase: r.phase,
    currency: r.currency,
    old_price: r.old_price,
    new_price: r.new_price,
    old_count: r.old_count,
    new_count: r.new_count,
    observed_at: r.observed_at.toISOString(),
    changed_at: r.changed_at.toISOString(),
  };
}

/** `since` absent: `absent`; `now`: the head; else a cursor checked against the log. */
function startOf(value: unknown, name: string, log: LogState, absent: bigint): bigint {
  if (value === undefined || value === '') return absent;
  if (typeof value !== 'string') throw badParameter(name, 'a single cursor');
  if (value === 'now') return log.head;
  return startAfter(parseCursor(value, name), log);
}

export function registerChangeRoutes(app: FastifyInstance, o: ChangeRouteOptions): void {
  const slots = o.slots ?? new StreamSlots();
  const q = (req: FastifyRequest) => req.query as FeedQuery;
  const key = (req: FastifyRequest) => req.apiKey as ApiKey;
  // preClose, not onClose: the server's close waits for open responses, and a stream never ends
  // by itself, so streams must be ended before it (else shutdown hangs on every open stream).
  app.addHook('preClose', async () => o.waker.closeAll());

  app.get(
    '/v1/prices/changes',
    {
      config: { endpoint: 'GET /v1/prices/changes' },
      schema: CHANGES,
    },
    async (req, reply) => {
      const markets = parseMarkets(q(req).markets, FEED_MARKETS);
      const limit = q(req).limit ?? 500;
      const log = await o.log.state();
      // Without a cursor: from the oldest change the log still keeps.
      const after = startOf(q(req).since, 'since', log, log.prunedThrough);
      const page = await o.log.page(after, log.head, markets, limit);
      return reply.header('cache-control', 'no-store').send({
        data: page.rows.map((r) => changeJson(log.epoch, r)),
        next_cursor: formatCursor(log.epoch, page.next),
        has_more: page.full,
        requestor: key(req).customer,
        plan: key(req).plan,
        timestamp: new Date().toISOString(),
      });
    },
  );

  app.get(
    '/v1/prices/stream',
    {
      config: { endpoint: 'GET /v1/prices/stream' },
      schema: STREAM,
    },
    async (req, reply) => {
      const markets = parseMarkets(q(req).markets, FEED_MARKETS);
      const log = await o.log.state();
      // EventSource sends Last-Event-ID on reconnection: it wins over the URL's since.
      const lastId = req.headers['last-event-id'];
      const after =
        typeof lastId === 'string' && lastId.trim() !== ''
          ? startOf(lastId, 'Last-Event-ID', log, log.head)
          : startOf(q(req).since, 'since', log, log.head);
      const k = key(req);
      const limit = STREAMS_PER_KEY[k.plan] ?? 0;
      if (!(await takeSlot(slots, k.id, limit, req)))
        throw new ApiError(
          429,
          'too_many_streams',
          `this key already has ${limit} open streams (its plan's limit); close one first`,
          { 'retry-after': '5' },
        );
      try {
        await stream(req, reply, o, { epoch: log.epoch, after, markets });
      } finally {
        slots.give(k.id);
      }
      return reply;
    },
  );
}

/** A slot, or none; a counter that cannot answer (a cluster primary gone) is a 503, not a 500. */
async function takeSlot(slots: StreamSlotCounter, keyId: string, limit: number, req: FastifyRequest) {
  try {
    return await slots.take(keyId, limit);
  } catch (err) {
    req.log.warn({ err }, 'counting open streams failed');
    throw new ApiError(503, 'not_available', 'open streams cannot be counted right now; try again shortly', {
      'retry-after': '1',
    });
  }
}

/** Writes the stream until the client leaves, the server closes, or the log can no longer continue. */
async function stream(
  req: FastifyRequest,
  reply: FastifyReply,
  o: ChangeRouteOptions,
  start: { epoch: string; after: bigint; markets: readonly string[] },
): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    connection: 'keep-alive',
    // nginx and similar proxies buffer responses unless told not to.
    'x-accel-buffering': 'no',
  });
  if (req.method === 'HEAD') return void res.end();
  const ctl = o.waker.open();
  const gone = (): void => ctl.abort();
  res.once('close', gone);
  const write = async (text: string): Promise<void> => {
    if (!res.write(text)) await once(res, 'drain', { signal: ctl.signal });
  };
  try {
    await write(`retry: 2000\n: following changes after ${formatCursor(start.epoch, start.after)}\n\n`);
    let after = start.after;
    let quietSince = Date.now();
    while (!ctl.signal.aborted) {
      const log = await o.log.state();
      if (log.epoch !== start.epoch || after < log.prunedThrough) {
        // Rebuilt or overtaken by retention while we followed: say so, and let the client start over.
        await write(
          `event: error\ndata: ${JSON.stringify(new ApiError(410, 'cursor_expired', 'the change log moved on; read the lists again and continue with since=now').body())}\n\n`,
        );
        break;
      }
      const page = await o.log.page(after, log.head, start.markets, 500);
      if (page.rows.length > 0) {
        let text = '';
        for (const r of page.rows) {
          const json = changeJson(log.epoch, r);
          text += `id: ${String(json.cursor)}\nevent: change\ndata: ${JSON.stringify(json)}\n\n`;
        }
        await write(text);
        quietSince = Date.now();
      }
      after = page.next;
      if (page.full) continue;
      if (Date.now() - quietSince >= (o.keepAliveMs ?? 15_000)) {
        await write(': keep-alive\n\n');
        quietSince = Date.now();
      }
      await o.waker.wait(Math.min(o.pollMs ?? 5_000, o.keepAliveMs ?? 15_000), ctl.signal);
    }
  } catch (err) {
    // The client left mid-write (AbortError), or the database went away: the client reconnects
    // with its Last-Event-ID and loses nothing.
    if (!ctl.signal.aborted && !res.destroyed) {
      const e =
        err instanceof ApiError
          ? err
          : new ApiError(503, 'not_available', 'the change log is unavailable; reconnect shortly');
      res.write(`event: error\ndata: ${JSON.stringify(e.body())}\n\n`);
    }
  } finally {
    res.off('close', gone);
    o.waker.forget(ctl);
    if (!res.destroyed) res.end();
  }
}
