/**
 * The simulator's HTTP side: one listener per marketplace (its own port, so each looks like a
 * separate host to the pollers), serving that marketplace's upstream format with faults on top,
 * and a control listener for the clock, faults, overrides and the truth.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import {
  getMarket,
  isMarketSlug,
  MARKETS,
  parsePrice,
  PRICE_SCALE,
  type MarketSlug,
  type UpstreamFormat,
} from '@skinprices/domain';
import type { Logger } from '@skinprices/runtime';
import type { SimClock } from './clock.js';
import type { Extras } from './extras.js';
import { duplicateFirst, emptyFirstList, type FaultBoard, type FaultSpec, zeroPrices } from './faults.js';
import { ROUTES, type SimContext, type UpstreamResponse } from './formats/index.js';
import type { MarketModel } from './model.js';
import { truth, TRUTH_KINDS, type TruthKind } from './truth.js';

export interface SimulatorDeps {
  model: MarketModel;
  extras: Extras;
  clock: SimClock;
  faults: FaultBoard;
  logger: Logger;
}

export interface SimulatorOptions {
  host: string;
  /** Control API port; 0 picks a free one. */
  controlPort: number;
  /** Marketplace i listens on basePort + i (0: free ports). */
  basePort: number;
  /**
   * Marketplaces served in another upstream format than the registry's (eu-a as Skinport …):
   * the simulator side of pointing a poller at a real marketplace's format.
   */
  formats?: Partial<Record<MarketSlug, UpstreamFormat>>;
  /**
   * Every marketplace also answers the history format's daily closes (`/api/history/daily`) and
   * recent hourly candles (`/api/history/hourly`): a demo platform imports a year of them in
   * minutes instead of observing a year. @default false
   */
  dailyHistory?: boolean;
}

export interface RunningSimulator {
  controlUrl: string;
  marketUrls: Record<MarketSlug, string>;
  stop(): Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
};

/** Upstream answers carry the simulated time in `Date`, as a real server carries its own clock. */
const simDate = (clock: SimClock): Record<string, string> => ({ date: new Date(clock.now()).toUTCString() });

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 1_000_000) throw new Error('body too large');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as unknown) : {};
}

export class Simulator {
  private readonly servers: Server[] = [];
  /** Per marketplace: requests answered and the wall-clock time of the first (benchmarks time cold starts from it). */
  private readonly traffic = new Map<MarketSlug, { requests: number; first_at: number }>();

  private dailyHistory = false;
  /** Per marketplace, the format it is served in. */
  private readonly formatOf = new Map<MarketSlug, UpstreamFormat>(MARKETS.map((m) => [m.slug, m.upstreamFormat]));

  constructor(private readonly deps: SimulatorDeps) {}

  async start(options: SimulatorOptions): Promise<RunningSimulator> {
    for (const [slug, format] of Object.entries(options.formats ?? {}))
      if (isMarketSlug(slug) && format) this.formatOf.set(slug, format);
    this.dailyHistory = options.dailyHistory ?? false;
    const marketUrls = {} as Record<MarketSlug, string>;
    for (const [i, m] of MARKETS.entries()) {
      const port = options.basePort === 0 ? 0 : options.basePort + i;
      const server = createServer((req, res) => void this.serveMarket(m.slug, req, res));
      marketUrls[m.slug] = await this.listen(server, options.host, port);
    }
    const control = createServer((req, res) => void this.serveControl(req, res, marketUrls));
    const controlUrl = await this.listen(control, options.host, options.controlPort);
    return { controlUrl, marketUrls, stop: () => this.stop() };
  }

  private async listen(server: Server, host: string, port: number): Promise<string> {
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    this.servers.push(server);
    return `http://${host}:${(server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.servers.splice(0).map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          }),
      ),
    );
  }

  private async serveMarket(market: MarketSlug, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const seen = this.traffic.get(market);
    if (seen) seen.requests++;
    else this.traffic.set(market, { requests: 1, first_at: Date.now() });
    try {
      const url = new URL(req.url ?? '/', 'http://sim');
      const route =
        ROUTES[this.formatOf.get(market) ?? getMarket(market).upstreamFormat][url.pathname] ??
        (this.dailyHistory ? ROUTES.history[url.pathname] : undefined);
      if (req.method !== 'GET' || !route) return json(res, 404, { error: 'not found' }, simDate(this.deps.clock));
      const faults = this.deps.faults.pick(market, url.pathname);
      for (const f of faults) if (f.kind === 'latency') await sleep(f.latencyMs ?? 1000);
      const ctx: SimContext = { model: this.deps.model, extras: this.deps.extras, clock: this.deps.clock, market };
      const answer = route(ctx, url.searchParams, { headers: req.headers });
      await this.send(res, answer, faults);
    } catch (err) {
      this.deps.logger.error({ err, market }, 'simulator route failed');
      if (!res.headersSent) json(res, 500, { error: 'internal' });
    }
  }

  /** Writes the answer, bent by whichever fault fired (the first one that changes the body wins). */
  private async send(res: ServerResponse, answer: UpstreamResponse, faults: FaultSpec[]): Promise<void> {
    const { body } = answer;
    const date = { ...simDate(this.deps.clock), ...answer.headers };
    const fault = faults.find((f) => f.kind !== 'latency');
    switch (fault?.kind) {
      case 'error5xx':
        return json(res, fault.status ?? 503, { error: 'service unavailable' }, date);
      case 'rateLimit':
        return json(
          res,
          429,
          { error: 'too many requests' },
          { ...date, 'retry-after': String(fault.retryAfterS ?? 1) },
        );
      case 'malformed': {
        const text = JSON.stringify(body).slice(0, -1) + ',,}';
        res.writeHead(200, { 'content-type': 'application/json', ...date });
        return void res.end(text);
      }
      case 'truncated': {
        const text = Buffer.from(JSON.stringify(body));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': text.length, ...date });
        res.write(text.subarray(0, Math.floor(text.length / 2)));
        await sleep(20);
        res.destroy();
        return;
      }
      case 'slowDrip': {
        const text = Buffer.from(JSON.stringify(body));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': text.length, ...date });
        for (let i = 0; i < text.length && !res.destroyed; i += 256) {
          res.write(text.subarray(i, i + 256));
          await sleep(fault.dripMs ?? 200);
        }
        return void res.end();
      }
      case 'emptyPage':
        return this.answer(res, { ...answer, body: emptyFirstList(body) }, date);
      case 'duplicates':
        return this.answer(res, { ...answer, body: duplicateFirst(body) }, date);
      case 'zeroPrices':
        return this.answer(res, { ...answer, body: zeroPrices(body) }, date);
      default:
        return this.answer(res, answer, date);
    }
  }

  /** An answer as its format sends it: JSON, Brotli-compressed where the format does that. */
  private answer(res: ServerResponse, answer: UpstreamResponse, headers: Record<string, string>): void {
    if (answer.encoding !== 'br') return json(res, answer.status, answer.body, headers);
    const text = brotliCompressSync(JSON.stringify(answer.body), {
      params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 4 },
    });
    res.writeHead(answer.status, {
      'content-type': 'application/json',
      'content-encoding': 'br',
      'content-length': text.length,
      ...headers,
    });
    res.end(text);
  }

  private async serveControl(
    req: IncomingMessage,
    res: ServerResponse,
    marketUrls: Record<string, string>,
  ): Promise<void> {
    const { clock, faults, model } = this.deps;
    try {
      const url = new URL(req.url ?? '/', 'http://sim');
      const route = `${req.method} ${url.pathname}`;
      switch (route) {
        case 'GET /healthz':
          return json(res, 200, { ok: true });
        case 'GET /_sim/markets':
          return json(
            res,
            200,
            MARKETS.map((m) => ({
              slug: m.slug,
              format: this.formatOf.get(m.slug),
              currency: m.currency,
              baseUrl: marketUrls[m.slug],
            })),
          );
        case 'GET /_sim/clock':
          return json(res, 200, clock.state());
        case 'GET /_sim/traffic':
          return json(res, 200, Object.fromEntries(this.traffic));
        case 'POST /_sim/clock':
          return await this.setClock(req, res);
        case 'GET /_sim/faults':
          return json(res, 200, faults.list());
        case 'POST /_sim/faults':
          return await this.setFaults(req, res);
        case 'DELETE /_sim/faults':
          faults.clear(url.searchParams.get('market') ?? undefined);
          return json(res, 200, faults.list());
        case 'POST /_sim/override':
          return await this.setOverride(req, res);
        case 'DELETE /_sim/override':
          model.clearOverrides();
          return json(res, 200, { ok: true });
        case 'GET /_sim/truth':
          return this.serveTruth(url.searchParams, res);
        case 'GET /_sim/catalogue':
          return json(
            res,
            200,
            model.catalogue.map((i) => ({ market_hash_name: i.marketHashName, phase: i.phase, category: i.category })),
          );
        default:
          return json(res, 404, { error: 'not found' });
      }
    } catch (err) {
      json(res, 400, { error: err instanceof Error ? err.message : String(err) });
    }
  }

  /** POST /_sim/clock: sets the speed, then advances, then sets the time, whichever the body names. */
  private async setClock(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { clock } = this.deps;
    const b = (await readJson(req)) as { advanceMs?: number; setMs?: number; speed?: number };
    if (b.speed !== undefined) clock.setSpeed(b.speed);
    if (b.advanceMs !== undefined) clock.advance(b.advanceMs);
    if (b.setMs !== undefined) clock.set(b.setMs);
    json(res, 200, clock.state());
  }

  /** POST /_sim/faults: one marketplace's fault, or every marketplace's for `market: '*'`. */
  private async setFaults(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { faults } = this.deps;
    const b = (await readJson(req)) as { market?: string } & FaultSpec;
    const targets = b.market === '*' ? MARKETS.map((m) => m.slug) : [b.market];
    for (const t of targets) {
      if (!isMarketSlug(t)) return json(res, 400, { error: `unknown market '${String(t)}'` });
      const { market: _m, ...spec } = b;
      faults.set(t, spec);
    }
    json(res, 200, faults.list());
  }

  /**
   * POST /_sim/override: one catalogue item's lowest price (null: no listing) and listing count on
   * one marketplace, from the simulated now on.
   */
  private async setOverride(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { clock, model } = this.deps;
    const b = (await readJson(req)) as {
      market?: string;
      market_hash_name?: string;
      phase?: string;
      price?: string | null;
      count?: number;
    };
    if (!isMarketSlug(b.market)) return json(res, 400, { error: 'market: unknown' });
    const item = model.find(b.market_hash_name ?? '', b.phase ?? '');
    if (!item) return json(res, 404, { error: 'no such catalogue item' });
    const priceMinor =
      b.price === null || b.price === undefined
        ? null
        : Number(
            parsePrice(b.price)
              .times(10 ** PRICE_SCALE)
              .toFixed(0),
          );
    model.setOverride(b.market, item, { priceMinor, count: b.count ?? 1, from: clock.now() });
    json(res, 200, { ok: true, at: clock.now() });
  }

  /**
   * GET /_sim/truth: one marketplace's records of a kind at `at` (default the simulated now), sales
   * from `from` (default an hour before `at`).
   */
  private serveTruth(params: URLSearchParams, res: ServerResponse): void {
    const market = params.get('market') ?? '';
    const kind = (params.get('kind') ?? 'listings') as TruthKind;
    if (!isMarketSlug(market)) return json(res, 400, { error: 'market: unknown' });
    if (!TRUTH_KINDS.includes(kind)) return json(res, 400, { error: `kind: one of ${TRUTH_KINDS.join(', ')}` });
    const at = Number(params.get('at') ?? this.deps.clock.now());
    const from = Number(params.get('from') ?? at - 3_600_000);
    json(res, 200, { market, kind, at, records: truth(this.deps, market, kind, at, from) });
  }
}
