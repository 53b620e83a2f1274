/**
 * What the webhook scenario (reliability/webhooks.ts), its benchmark (bench/webhooks.ts) and the
 * delivery tests share: a world of their own (a keys schema with a key, a migrated webhooks schema,
 * price-changes.v1 under a suffix), subscriptions stored as the API stores them, the notifier as
 * deployed (a process to SIGKILL), changes produced as the materializer's outbox produces them, and
 * receivers that check every signature with the third-party `standardwebhooks` package and can be
 * told to be down, fail, throttle or hang.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_MIGRATIONS_DIR, KeyStore, type Plan } from '@skinprices/api';
import { EventProducer, topicFor, type EventMap } from '@skinprices/events';
import { createPool, ensureSchema, migrate, type Pool } from '@skinprices/store';
import { generateSecret, newSubscriptionId, SecretBox, WEBHOOKS_MIGRATIONS_DIR } from '@skinprices/webhooks';
import { Webhook } from 'standardwebhooks';
import { uniqueName, type TestStack } from '../../test/support/stack.js';

export type PriceChange = EventMap['priceChange'];

export interface HookWorld {
  stack: TestStack;
  /** Topic suffix (price-changes.v1<suffix>). */
  suffix: string;
  keysSchema: string;
  webhooksSchema: string;
  /** The key ring the notifier opens secrets with. */
  ring: string;
  keyId: string;
  pool: Pool;
}

/**
 * A key of `plan` in a keys schema of its own and a migrated webhooks schema (both dropped at the
 * stack's cleanup), on the topics of `suffix`.
 */
export async function hookWorld(stack: TestStack, suffix: string, plan: Plan = 'enterprise'): Promise<HookWorld> {
  const keysSchema = uniqueName('hook_keys');
  const webhooksSchema = uniqueName('hooks');
  const keysPool = createPool({ databaseUrl: stack.env.databaseUrl, schema: keysSchema, max: 1 });
  await ensureSchema(keysPool, keysSchema);
  await migrate(keysPool, API_MIGRATIONS_DIR);
  const { key } = await new KeyStore(keysPool).create({ customer: 'hooks@example.com', plan });
  await keysPool.end();
  const pool = createPool({ databaseUrl: stack.env.databaseUrl, schema: webhooksSchema, max: 2 });
  await ensureSchema(pool, webhooksSchema);
  await migrate(pool, WEBHOOKS_MIGRATIONS_DIR);
  stack.defer(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${webhooksSchema} CASCADE; DROP SCHEMA IF EXISTS ${keysSchema} CASCADE`);
    await pool.end();
  });
  return { stack, suffix, keysSchema, webhooksSchema, ring: `k1:${SecretBox.generateKey()}`, keyId: key.id, pool };
}

/** A subscription stored as the API stores it; returns its id and its secret. */
export async function subscribe(
  world: HookWorld,
  url: string,
  filters: Record<string, unknown> = {},
  batch: { max: number; windowMs: number } = { max: 1, windowMs: 0 },
): Promise<{ id: string; secret: string }> {
  const id = newSubscriptionId();
  const secret = generateSecret();
  await world.pool.query(
    `INSERT INTO webhook_subscriptions (id, key_id, url, filters, batch_max, batch_window_ms, secret_sealed)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      id,
      world.keyId,
      url,
      JSON.stringify(filters),
      batch.max,
      batch.windowMs,
      new SecretBox(world.ring).seal(secret, id),
    ],
  );
  await world.pool.query(`SELECT pg_notify('skinprices_webhooks', $1)`, [world.webhooksSchema]);
  return { id, secret };
}

/** The notifier's environment for this world (services/notifier/src/config.ts). */
export function notifierEnv(world: HookWorld, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: world.stack.env.databaseUrl,
    KAFKA_BROKERS: world.stack.env.brokers,
    SCHEMA_REGISTRY_URL: world.stack.env.registryUrl,
    TOPIC_SUFFIX: world.suffix,
    GROUP_ID: `notifier${world.suffix}`,
    KEYS_SCHEMA: world.keysSchema,
    WEBHOOKS_SCHEMA: world.webhooksSchema,
    WEBHOOK_SECRET_KEYS: world.ring,
    // The receivers listen on loopback: the operator's setting for local use.
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** Waits until the notifier at `metricsPort` says it is running (consumer joined, dispatcher on). */
export async function notifierRunning(metricsPort: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    if (/^notifier_state\{state="running"\} 1$/m.test(text)) return;
    if (Date.now() > deadline) throw new Error(`the notifier on :${metricsPort} did not run within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Produces changes to price-changes.v1<suffix>, as the outbox does (keyed by item). */
export async function produceChanges(world: HookWorld, changes: readonly PriceChange[]): Promise<void> {
  const producer = new EventProducer(world.stack.kafka);
  await producer.connect();
  try {
    const codec = await world.stack.serde.codec(`${topicFor('priceChange').name}${world.suffix}`, 'priceChange');
    for (let i = 0; i < changes.length; i += 500) await producer.send(codec, changes.slice(i, i + 500));
  } finally {
    await producer.disconnect();
  }
}

/** What a receiver does with the n-th request (0-based) it gets. */
export type Behaviour =
  { kind: 'ok' } | { kind: 'status'; status: number; retryAfterS?: number } | { kind: 'hang' } | { kind: 'close' };

export interface Arrival {
  id: string;
  /** Every change the message carried, as `market|name|phase|observed_at`. */
  changes: string[];
  type: string;
  /** Arrival time, epoch ms, and the (first) change's commit time from the body. */
  at: number;
  committedAt: number;
  /** The answer given: 2xx means accepted. */
  status: number | 'hang' | 'close';
}

interface BodyChange {
  market: string;
  market_hash_name: string;
  phase: string;
  observed_at: string;
  changed_at: string;
}
const changeKey = (c: BodyChange) => `${c.market}|${c.market_hash_name}|${c.phase}|${Date.parse(c.observed_at)}`;

/** The same key of a produced change. */
export const keyOf = (c: PriceChange) => `${c.market}|${c.market_hash_name}|${c.phase}|${c.observed_at}`;

/**
 * A receiver on loopback that verifies every request with `standardwebhooks` (a bad signature is
 * recorded in `badSignatures` and answered 401) and then behaves as `behave` says. `stop()` and
 * `start()` take it down and up on the same port.
 */
export class Receiver {
  readonly arrivals: Arrival[] = [];
  badSignatures = 0;
  private server: Server | undefined;
  private readonly hanging = new Set<ServerResponse>();
  private n = 0;
  port = 0;

  private readonly secrets: string[] = [];

  constructor(private behave: (n: number) => Behaviour = () => ({ kind: 'ok' })) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** A subscription's secret: a message verifies when it verifies with any of them. */
  addSecret(secret: string): void {
    this.secrets.push(secret);
  }

  setBehaviour(behave: (n: number) => Behaviour): void {
    this.behave = behave;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Down: the port refuses connections; hanging requests are cut. */
  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.hanging.clear();
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Requests it holds unanswered now (a hanging receiver's). */
  get holding(): number {
    return this.hanging.size;
  }

  /** Accepted messages (2xx) by webhook-id. */
  accepted(): Arrival[] {
    return this.arrivals.filter((a) => typeof a.status === 'number' && a.status < 300);
  }

  private verified(raw: string, headers: Record<string, string>) {
    for (const secret of this.secrets)
      try {
        return new Webhook(secret).verify(raw, headers) as { type: string; data: Record<string, unknown> };
      } catch {
        // the next secret
      }
    return undefined;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = this.verified(raw, req.headers as Record<string, string>);
    if (!body) {
      this.badSignatures++;
      res.writeHead(401).end();
      return;
    }
    const list = (body.type === 'price.changed.batch' ? body.data.changes : [body.data]) as BodyChange[];
    const changes = body.type === 'webhook.test' ? [] : list.map(changeKey);
    const committed = body.type === 'webhook.test' ? Date.now() : Date.parse(String(list[0]?.changed_at));
    const behaviour = this.behave(this.n++);
    const arrival: Arrival = {
      id: String(req.headers['webhook-id']),
      changes,
      type: body.type,
      at: Date.now(),
      committedAt: committed,
      status: behaviour.kind === 'ok' ? 204 : behaviour.kind === 'status' ? behaviour.status : behaviour.kind,
    };
    this.arrivals.push(arrival);
    if (behaviour.kind === 'ok') res.writeHead(204).end();
    else if (behaviour.kind === 'status')
      res
        .writeHead(
          behaviour.status,
          behaviour.retryAfterS === undefined ? {} : { 'retry-after': String(behaviour.retryAfterS) },
        )
        .end('receiver says no');
    else if (behaviour.kind === 'close') res.destroy();
    else {
      this.hanging.add(res);
      res.once('close', () => this.hanging.delete(res));
    }
  }
}

/** A change of `name` on `market` from `oldPrice` to `newPrice`, committed now. */
export function change(
  market: string,
  name: string,
  oldPrice: string | null,
  newPrice: string | null,
  observedAt: number,
): PriceChange {
  return {
    market,
    market_hash_name: name,
    phase: '',
    currency: 'USD',
    old_price: oldPrice,
    new_price: newPrice,
    old_count: oldPrice === null ? 0 : 3,
    new_count: newPrice === null ? 0 : 4,
    observed_at: observedAt,
    changed_at: Date.now(),
  };
}
