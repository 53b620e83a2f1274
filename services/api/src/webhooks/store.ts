/**
 * The webhook endpoints' SQL, on the notifier's webhooks schema (packages/webhooks/migrations),
 * through a pool of its own: the read pools may point at a hot standby, and these are writes,
 * so they go to WEBHOOKS_DATABASE_URL (the primary). The pool is opened on the first webhook
 * request, never at start: an API without webhooks, or on a standby with no primary configured,
 * never connects. Every write notifies the notifier (`skinprices_webhooks`, the schema's name) in
 * its own transaction, so a new subscription, a test or a retry is seen at once, and only once
 * committed. Every statement names the owning key: another key's subscription does not exist.
 */
import { createPool, type Contract, type DatabaseOf, type Pool } from '@skinprices/store';
import { Kysely, PostgresDialect, sql, type Generated, type Selectable, type Transaction } from 'kysely';
import { ApiError } from '../errors.js';

/**
 * The columns of the webhooks schema these queries use (all of the two tables);
 * test/integration/webhooks-api.test.ts checks them against the migrated tables.
 */
export const WEBHOOKS_API_CONTRACT = {
  webhook_subscriptions: {
    id: 'text',
    key_id: 'bigint',
    url: 'text',
    description: 'text',
    filters: 'jsonb',
    batch_max: 'integer',
    batch_window_ms: 'integer',
    secret_sealed: 'text',
    previous_secret_sealed: 'text?',
    previous_secret_until: 'timestamptz?',
    status: 'text',
    disabled_reason: 'text?',
    disabled_at: 'timestamptz?',
    failing_since: 'timestamptz?',
    created_at: 'timestamptz',
    updated_at: 'timestamptz',
  },
  webhook_messages: {
    id: 'text',
    subscription_id: 'text',
    type: 'text',
    body: 'text',
    event_count: 'integer',
    status: 'text',
    attempts: 'integer',
    first_attempt_at: 'timestamptz?',
    next_attempt_at: 'timestamptz',
    lease_until: 'timestamptz?',
    committed_at: 'timestamptz',
    created_at: 'timestamptz',
    last_attempt_at: 'timestamptz?',
    last_status_code: 'integer?',
    last_error: 'text?',
    delivered_at: 'timestamptz?',
    latency_ms: 'integer?',
  },
} as const satisfies Contract;
type Tables = DatabaseOf<typeof WEBHOOKS_API_CONTRACT>;
/** Kysely's view: what the database fills in is Generated. */
interface Db {
  webhook_subscriptions: Omit<Tables['webhook_subscriptions'], 'status' | 'created_at' | 'updated_at'> & {
    status: Generated<string>;
    created_at: Generated<Date>;
    updated_at: Generated<Date>;
  };
  webhook_messages: Omit<
    Tables['webhook_messages'],
    'attempts' | 'first_attempt_at' | 'next_attempt_at' | 'created_at'
  > & {
    attempts: Generated<number>;
    first_attempt_at: Generated<Date | null>;
    next_attempt_at: Generated<Date>;
    created_at: Generated<Date>;
  };
}
export type SubscriptionRow = Selectable<Db['webhook_subscriptions']>;
export type MessageRow = Omit<Selectable<Db['webhook_messages']>, 'body' | 'lease_until' | 'first_attempt_at'>;
type NewSubscription = Pick<
  SubscriptionRow,
  'id' | 'url' | 'description' | 'filters' | 'batch_max' | 'batch_window_ms' | 'secret_sealed'
>;

/** The channel the notifier listens on; the payload is the schema's name. */
const NOTIFY_CHANNEL = 'skinprices_webhooks';

/** How long the secret before a rotation keeps signing. */
const ROTATION_OVERLAP = '24 hours';

const MESSAGE_COLUMNS = [
  'id',
  'subscription_id',
  'type',
  'status',
  'attempts',
  'event_count',
  'created_at',
  'committed_at',
  'next_attempt_at',
  'last_attempt_at',
  'last_status_code',
  'last_error',
  'delivered_at',
  'latency_ms',
] as const;

export interface WebhookStoreOptions {
  databaseUrl: string;
  /** The webhooks schema (WEBHOOKS_SCHEMA). */
  schema: string;
  /** application_name of the connections. @default 'api-webhooks' */
  applicationName?: string;
  /** Connections at most: these are a few small writes per customer action. @default 4 */
  max?: number;
}

/** A schema not there (yet): the notifier migrates it, the API never does. */
const UNMIGRATED = new Set(['42P01', '3F000']);

export class WebhookStore {
  private pool: Pool | undefined;
  private kysely: Kysely<Db> | undefined;

  constructor(private readonly o: WebhookStoreOptions) {}

  /** The schema-qualified query builder, opening the pool on first use. */
  private db(): Kysely<Db> {
    if (!this.kysely) {
      this.pool = createPool({
        databaseUrl: this.o.databaseUrl,
        max: this.o.max ?? 4,
        applicationName: this.o.applicationName ?? 'api-webhooks',
      });
      this.kysely = new Kysely<Db>({ dialect: new PostgresDialect({ pool: this.pool }) });
    }
    return this.kysely.withSchema(this.o.schema);
  }

  /** Runs `f`; a schema not migrated yet is a 503 saying who migrates it (other errors: app.ts's). */
  private async run<T>(f: (db: Kysely<Db>) => Promise<T>): Promise<T> {
    try {
      return await f(this.db());
    } catch (err) {
      if (!UNMIGRATED.has(String((err as { code?: unknown }).code ?? ''))) throw err;
      throw new ApiError(
        503,
        'webhooks_unavailable',
        `webhooks are not ready on this server: the notifier creates their tables (schema ${this.o.schema}) at its start; try again shortly`,
        { 'retry-after': '30' },
      );
    }
  }

  /** A write and its notification, committed together. */
  private write<T>(f: (trx: Transaction<Db>) => Promise<T>): Promise<T> {
    return this.run((db) =>
      db.transaction().execute(async (trx) => {
        const result = await f(trx);
        await sql`SELECT pg_notify(${NOTIFY_CHANNEL}, ${this.o.schema})`.execute(trx);
        return result;
      }),
    );
  }

  list(keyId: string): Promise<SubscriptionRow[]> {
    return this.run((db) =>
      db
        .selectFrom('webhook_subscriptions')
        .selectAll()
        .where('key_id', '=', keyId)
        .orderBy('created_at')
        .orderBy('id')
        .execute(),
    );
  }

  get(keyId: string, id: string): Promise<SubscriptionRow | undefined> {
    return this.run((db) =>
      db
        .selectFrom('webhook_subscriptions')
        .selectAll()
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .executeTakeFirst(),
    );
  }

  /**
   * Inserts `s` unless the key already has `limit` subscriptions ('limit'). Creates of one key
   * are serialised by an advisory lock on it: two at once would each count the other's absent
   * row (READ COMMITTED) and both pass the limit.
   */
  create(keyId: string, limit: number, s: NewSubscription): Promise<SubscriptionRow | 'limit'> {
    return this.write(async (trx) => {
      // Namespaced by schema and purpose, so it meets no other advisory lock of the database.
      const lock = `${NOTIFY_CHANNEL}:${this.o.schema}:subscriptions:${keyId}`;
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${lock}, 0))`.execute(trx);
      const { n } = await trx
        .selectFrom('webhook_subscriptions')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('key_id', '=', keyId)
        .executeTakeFirstOrThrow();
      if (Number(n) >= limit) return 'limit';
      return trx
        .insertInto('webhook_subscriptions')
        .values({ ...s, key_id: keyId, filters: JSON.stringify(s.filters) })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
  }

  /** Deletes one with its messages (ON DELETE CASCADE); false when the key has no such one. */
  async remove(keyId: string, id: string): Promise<boolean> {
    const gone = await this.write((trx) =>
      trx
        .deleteFrom('webhook_subscriptions')
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .returning('id')
        .executeTakeFirst(),
    );
    return gone !== undefined;
  }

  /** The new sealed secret in; the current one kept, signing too for ROTATION_OVERLAP. */
  rotate(keyId: string, id: string, sealed: string): Promise<SubscriptionRow | undefined> {
    return this.write((trx) =>
      trx
        .updateTable('webhook_subscriptions')
        // The right-hand sides read the row as it was: the previous secret is the current one.
        .set({
          previous_secret_sealed: sql<string>`secret_sealed`,
          previous_secret_until: sql<Date>`now() + ${ROTATION_OVERLAP}::interval`,
          secret_sealed: sealed,
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .returningAll()
        .executeTakeFirst(),
    );
  }

  /** Active again, its failure clock reset; waiting messages resume. */
  enable(keyId: string, id: string): Promise<SubscriptionRow | undefined> {
    return this.write((trx) =>
      trx
        .updateTable('webhook_subscriptions')
        .set({
          status: 'active',
          disabled_reason: null,
          disabled_at: null,
          failing_since: null,
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .returningAll()
        .executeTakeFirst(),
    );
  }

  /** A message due now for the key's subscription `id`; undefined when the key has no such one. */
  enqueueTest(keyId: string, id: string, message: { id: string; body: string }): Promise<string | undefined> {
    return this.write(async (trx) => {
      const owned = await trx
        .selectFrom('webhook_subscriptions')
        .select('id')
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .executeTakeFirst();
      if (!owned) return undefined;
      await trx
        .insertInto('webhook_messages')
        .values({
          id: message.id,
          subscription_id: id,
          type: 'webhook.test',
          body: message.body,
          event_count: 1,
          status: 'pending',
          committed_at: sql<Date>`now()`,
        })
        .execute();
      return message.id;
    });
  }

  /**
   * A page of the subscription's messages, newest first, older than the message `before`:
   * undefined when the key has no such subscription, 'before' when `before` is not one of its
   * messages.
   */
  deliveries(
    keyId: string,
    id: string,
    page: { status?: string; limit: number; before?: string },
  ): Promise<MessageRow[] | 'before' | undefined> {
    return this.run(async (db) => {
      const owned = await db
        .selectFrom('webhook_subscriptions')
        .select('id')
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .executeTakeFirst();
      if (!owned) return undefined;
      if (page.before !== undefined) {
        const known = await db
          .selectFrom('webhook_messages')
          .select('id')
          .where('id', '=', page.before)
          .where('subscription_id', '=', id)
          .executeTakeFirst();
        if (!known) return 'before';
      }
      const messages = sql.id(this.o.schema, 'webhook_messages');
      let q = db.selectFrom('webhook_messages').select(MESSAGE_COLUMNS).where('subscription_id', '=', id);
      if (page.status !== undefined) q = q.where('status', '=', page.status);
      // In SQL, not through a JS Date: created_at has microseconds, a Date only milliseconds.
      if (page.before !== undefined)
        q = q.where(
          sql<boolean>`(created_at, id) < (SELECT b.created_at, b.id FROM ${messages} b WHERE b.id = ${page.before})`,
        );
      return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(page.limit).execute();
    });
  }

  /**
   * Makes the message due now with its attempts and its 24-hour retry horizon (first_attempt_at)
   * starting over; one being delivered this moment
   * is left to that attempt. Undefined when the key has no such subscription or it no such message.
   */
  retry(keyId: string, id: string, messageId: string): Promise<MessageRow | undefined> {
    return this.write(async (trx) => {
      const found = await trx
        .selectFrom('webhook_messages as m')
        .innerJoin('webhook_subscriptions as s', 's.id', 'm.subscription_id')
        .select(['m.id', 'm.status'])
        .where('m.id', '=', messageId)
        .where('m.subscription_id', '=', id)
        .where('s.key_id', '=', keyId)
        .forUpdate('m')
        .executeTakeFirst();
      if (!found) return undefined;
      const base = trx.updateTable('webhook_messages').where('id', '=', messageId);
      if (found.status === 'delivering')
        return trx
          .selectFrom('webhook_messages')
          .select(MESSAGE_COLUMNS)
          .where('id', '=', messageId)
          .executeTakeFirstOrThrow();
      return base
        .set({
          status: 'pending',
          attempts: 0,
          first_attempt_at: null,
          next_attempt_at: sql<Date>`now()`,
          lease_until: null,
        })
        .returning(MESSAGE_COLUMNS)
        .executeTakeFirstOrThrow();
    });
  }

  async close(): Promise<void> {
    await this.kysely?.destroy();
    this.kysely = undefined;
    this.pool = undefined;
  }
}
