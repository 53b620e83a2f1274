/*
 * The notifier: the consumer of price-changes.v1 that stores what matched (consumer.ts), the
 * sealer of batches (sealer.ts) and the dispatcher that delivers (dispatcher.ts), over one cache
 * of the served subscriptions (subscriptions.ts). Whatever a part commits wakes the next one at
 * once — a batch's messages the dispatcher, its batch events the sealer, a seal the dispatcher,
 * a NOTIFY of the API about subscriptions (reloaded) both, one about messages made due (a test, a
 * retry) the dispatcher — so a change is on its way to its receivers within milliseconds of its
 * batch's commit, not a poll interval later.
 *
 *   created ──start()──▶ starting ──▶ running ──stop()──▶ stopping ──▶ stopped
 *                           └──(Kafka or PostgreSQL refuses)──▶ stopped (start() rejects)
 *
 * The webhooks schema is migrated by the caller (main.ts; tests with the same migrate) before
 * start(): the pool's search_path names it.
 */
import type { EventSerde } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { Admin, Kafka } from 'kafkajs';
import { ChangeConsumer, type CommittedBatch } from './consumer.js';
import { Deliverer } from './deliver.js';
import { Dispatcher } from './dispatcher.js';
import type { NotifierMetrics } from './metrics.js';
import { Retention } from './retention.js';
import { Sealer } from './sealer.js';
import { Subscriptions } from './subscriptions.js';

export type NotifierState = 'created' | 'starting' | 'running' | 'stopping' | 'stopped';
const STATES: readonly NotifierState[] = ['created', 'starting', 'running', 'stopping', 'stopped'];

export interface NotifierOptions {
  /** Kafka consumer group, and the key of the stored offsets. */
  groupId: string;
  /** Appended to price-changes.v1 (tests use their own topics). */
  topicSuffix: string;
  /** The schema of the webhook tables (the pool's search_path names it; NOTIFY payloads carry it). */
  webhooksSchema: string;
  /** The schema of the API keys. */
  keysSchema: string;
  /** The key ring that opens the sealed signing secrets (WEBHOOK_SECRET_KEYS). */
  secretKeys: string;
  /** Deliver to loopback, private and link-local addresses too. @default false */
  allowPrivateUrls?: boolean;
  /** @default 10000 */
  deliveryTimeoutMs?: number;
  /** @default 64 */
  maxInFlight?: number;
  /** @default 4 */
  perSubscriptionInFlight?: number;
  /** @default 250 */
  pollMs?: number;
  /** @default 5000 */
  subscriptionsRefreshMs?: number;
  /** @default 30000 */
  sessionTimeoutMs?: number;
  /** Finished messages (and the batch events they sealed) older than this leave the delivery log. @default 30 days */
  logRetentionMs?: number;
}

export interface NotifierDeps {
  pool: Pool;
  kafka: Kafka;
  serde: EventSerde;
  logger: Logger;
  /** @default none: nothing is measured */
  metrics?: NotifierMetrics;
}

export class Notifier {
  state: NotifierState = 'created';
  readonly subscriptions: Subscriptions;
  readonly dispatcher: Dispatcher;
  readonly sealer: Sealer;
  readonly retention: Retention;
  private consumer: ChangeConsumer | undefined;
  private admin: Admin | undefined;
  private readonly deliverer: Deliverer;
  private readonly batchListeners = new Set<(b: CommittedBatch) => void>();

  constructor(
    private readonly options: NotifierOptions,
    private readonly deps: NotifierDeps,
  ) {
    const { pool, logger, metrics } = deps;
    const timeoutMs = options.deliveryTimeoutMs ?? 10_000;
    const pollMs = options.pollMs ?? 250;
    this.subscriptions = new Subscriptions(
      {
        webhooksSchema: options.webhooksSchema,
        keysSchema: options.keysSchema,
        secretKeys: options.secretKeys,
        refreshMs: options.subscriptionsRefreshMs ?? 5_000,
      },
      { pool, logger },
    );
    this.deliverer = new Deliverer({ policy: { allowPrivate: options.allowPrivateUrls ?? false }, timeoutMs });
    const parts = { pool, logger, subscriptions: this.subscriptions, ...(metrics ? { metrics } : {}) };
    this.dispatcher = new Dispatcher(
      {
        maxInFlight: options.maxInFlight ?? 64,
        perSubscription: options.perSubscriptionInFlight ?? 4,
        deliveryTimeoutMs: timeoutMs,
        pollMs,
      },
      { ...parts, deliverer: this.deliverer },
    );
    this.sealer = new Sealer({ pollMs }, parts);
    this.retention = new Retention({ retentionMs: options.logRetentionMs ?? 30 * 86_400_000 }, { pool, logger });
    this.sealer.onSealed(() => this.dispatcher.wake());
    this.subscriptions.onDue(() => this.dispatcher.wake());
    this.subscriptions.onChange(() => {
      metrics?.subscriptions.set(this.subscriptions.list.length);
      this.dispatcher.wake();
      this.sealer.wake();
    });
    this.setState('created');
  }

  /** Hears every committed batch of the consumer (tests, benchmarks). */
  onBatch(listener: (b: CommittedBatch) => void): () => void {
    this.batchListeners.add(listener);
    return () => this.batchListeners.delete(listener);
  }

  async start(): Promise<void> {
    this.setState('starting');
    try {
      this.admin = this.deps.kafka.admin();
      await this.admin.connect();
      const { clusterId } = await this.admin.describeCluster();
      await this.subscriptions.start();
      // stop() came while the first load was being retried.
      if (this.state !== 'starting') return;
      this.sealer.start();
      this.dispatcher.start();
      this.retention.start();
      this.consumer = this.newConsumer(this.admin, clusterId);
      await this.consumer.start();
      this.setState('running');
      this.deps.logger.info(
        { group: this.options.groupId, topic: this.consumer.topic, subscriptions: this.subscriptions.list.length },
        'notifier running',
      );
    } catch (err) {
      await this.stop().catch(() => undefined);
      throw err;
    }
  }

  private newConsumer(admin: Admin, clusterId: string): ChangeConsumer {
    const { kafka, serde, pool, logger, metrics } = this.deps;
    const consumer = new ChangeConsumer(
      {
        groupId: this.options.groupId,
        topicSuffix: this.options.topicSuffix,
        clusterId,
        ...(this.options.sessionTimeoutMs ? { sessionTimeoutMs: this.options.sessionTimeoutMs } : {}),
        // A few missed refreshes are a blip; a minute of them is PostgreSQL (or the keys schema) away.
        maxSnapshotAgeMs: Math.max(60_000, 6 * (this.options.subscriptionsRefreshMs ?? 5_000)),
      },
      { kafka, admin, serde, pool, logger, subscriptions: this.subscriptions, ...(metrics ? { metrics } : {}) },
    );
    consumer.onCommitted((b) => {
      metrics?.messages.inc({ outcome: 'created' }, b.created);
      metrics?.messages.inc({ outcome: 'dropped' }, b.dropped);
      if (b.created > 0) this.dispatcher.wake();
      if (b.batchEvents > 0) this.sealer.wake();
      for (const l of this.batchListeners) l(b);
    });
    return consumer;
  }

  /**
   * Stops consuming, then sealing, then claiming; waits for the deliveries under way (up to the
   * delivery timeout) and gives back the leases still held.
   */
  async stop(): Promise<void> {
    this.setState('stopping');
    await this.consumer?.stop();
    await this.sealer.stop();
    await this.retention.stop();
    await this.dispatcher.stop();
    await this.subscriptions.stop();
    await this.admin?.disconnect().catch(() => undefined);
    this.admin = undefined;
    await this.deliverer.close().catch(() => undefined);
    this.setState('stopped');
  }

  private setState(state: NotifierState): void {
    this.state = state;
    for (const s of STATES) this.deps.metrics?.state.set({ state: s }, s === state ? 1 : 0);
  }
}
