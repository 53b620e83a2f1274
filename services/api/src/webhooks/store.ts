/**
 * The webhook endpoints' SQL, on the notifier's webhooks schema (packages/webhooks/migrations),
 * through a pool of its own: the read pools may point at a hot standby, and these are writes,
 * so they go to WEBHOOKS_DATABASE_URL (the primary). The pool is opened on the first webhook
 * request, never at start: an API without webhooks, or on a standby with no primary configured,
 * never connects. Every write notifies the notifiers in its own transaction, so it is seen at once
 * and only once committed: a subscription changed on WEBHOOKS_CHANNEL (they reload), a message
 * made due on WEBHOOK_DUE_CHANNEL (they only wake). Every statement names the owning key: another
 * key's subscription does not exist.
 *
 * Tests and retries count against the key's daily delivery limit in webhook_daily_usage, the row
 * the notifier counts its new messages in, under the same row lock (an upsert of the key's day).
 */
import { createPool, type Contract, type DatabaseOf, type Pool } from '@skinprices/store';
import { WEBHOOK_DUE_CHANNEL, WEBHOOKS_CHANNEL } from '@skinprices/webhooks';
import { Kysely, PostgresDialect, sql, type Generated, type Selectable, type Transaction } from 'kysely';
import { ApiError } from '../errors.js';

/**
 * The columns of the webhooks schema these queries use (all of the three tables);
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
    paused_until: 'timestamptz?',
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
  webhook_daily_usage: {
    key_id: 'bigint',
    day: 'date',
    messages: 'integer',
    dropped: 'integer',
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
  webhook_daily_usage: Tables['webhook_daily_usage'];
}
export type SubscriptionRow = Selectable<Db['webhook_subscriptions']>;
export type MessageRow = Omit<Selectable<Db['webhook_messages']>, 'body' | 'lease_until' | 'first_attempt_at'>;
type NewSubscription = Pick<
  SubscriptionRow,
  'id' | 'url' | 'description' | 'filters' | 'batch_max' | 'batch_window_ms' | 'secret_sealed'
>;

/** How long the secret before a rotation keeps signing. */
const ROTATION_OVERLAP = '24 hours';

/** The notification of a write that changed a subscription (none when it found or made none). */
const subscriptionChanged = (result: unknown): readonly string[] =>
  result === undefined || result === 'limit' ? [] : [WEBHOOKS_CHANNEL];

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

/** A key's deliveries of the current UTC day against its plan's limit (`usage` of GET /v1/webhooks). */
interface DailyUsage {
  /** The UTC day, YYYY-MM-DD. */
  day: string;
  /** Messages made: matched changes (or batches), tests and retries. */
  messages: number;
  /** Matches past the limit: counted, neither stored nor sent. */
  dropped: number;
}

const sqlState = (err: unknown): string => String((err as { code?: unknown } | null)?.code ?? '');

/** A conflict PostgreSQL resolved by rolling one transaction back: running it again succeeds. */
const CONFLICTS = new Set(['40P01', '40001']);

/**
 * What an operator must fix, by SQLSTATE or Node's error code, said in the answer: the
 * database's fault, not the request's, so never a 500. `transient`: a shorter Retry-After.
 */
const DATABASE_FAULTS: Record<string, { hint: string; transient?: boolean }> = {
  ENOTFOUND: { hint: 'its host name does not resolve' },
  EAI_AGAIN: { hint: 'its host name could not be resolved just now', transient: true },
  ECONNREFUSED: { hint: 'it refuses connections (not running, or another host or port)', transient: true },
  ETIMEDOUT: { hint: 'it does not answer', transient: true },
  EHOSTUNREACH: { hint: 'its host is unreachable', transient: true },
  ENETUNREACH: { hint: 'its network is unreachable', transient: true },
  ECONNRESET: { hint: 'it dropped the connection', transient: true },
  '28P01': { hint: "it refuses this server's password" },
  '28000': { hint: "it refuses this server's user or address (pg_hba.conf)" },
  '3D000': { hint: 'its database does not exist' },
  '25006': {
    hint: 'is read-only (a hot standby): WEBHOOKS_DATABASE_URL must name the primary, as subscriptions are written',
  },
  '53300': { hint: 'has no connection to spare', transient: true },
  '57P01': { hint: 'is shutting down', transient: true },
  '57P02': { hint: 'is shutting down', transient: true },
  '57P03': { hint: 'is starting up or in recovery', transient: true },
};

/**
 * The answer to a failure of the webhooks database, or undefined for app.ts's (a bug's 500, a
 * busy pool's 503). `schema` is WEBHOOKS_SCHEMA, named when its tables are missing.
 */
export function storeFailure(err: unknown, schema: string): ApiError | undefined {
  const code = sqlState(err);
  // A schema not there (yet): the notifier migrates it, the API never does.
  if (code === '42P01' || code === '3F000')
    return new ApiError(
      503,
      'webhooks_unavailable',
      `webhooks are not ready on this server: the notifier creates their tables (schema ${schema}) at its start; try again shortly`,
      { 'retry-after': '30' },
      err,
    );
  if (CONFLICTS.has(code))
    return new ApiError(
      503,
      'not_available',
      'this request met a concurrent one on the same subscription (a deadlock or serialization failure) twice; try again',
      { 'retry-after': '1' },
      err,
    );
  const message = err instanceof Error ? err.message : '';
  const fault =
    DATABASE_FAULTS[code] ??
    // Other connection exceptions (08…); a connection lost or timed out before an answer.
    (/^08/.test(code) || /Connection terminated/.test(message)
      ? { hint: 'dropped the connection or did not answer in time', transient: true }
      : undefined);
  if (!fault) return undefined;
  return new ApiError(
    503,
    'webhooks_unavailable',
    `webhooks are unavailable on this server: their database ${fault.hint} (the operator checks WEBHOOKS_DATABASE_URL); try again later`,
    { 'retry-after': fault.transient ? '30' : '300' },
    err,
  );
}

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

  /**
   * Runs `f`, once more after a deadlock or serialization failure (PostgreSQL rolled it back, so
   * nothing of the first run stays); what the database's state explains is a 503 (storeFailure).
   */
  private async run<T>(f: (db: Kysely<Db>) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await f(this.db());
      } catch (err) {
        if (attempt === 1 && CONFLICTS.has(sqlState(err))) continue;
        throw storeFailure(err, this.o.schema) ?? err;
      }
    }
  }

  /** A write and the notifications `channels` names for its result, committed together. */
  private write<T>(f: (trx: Transaction<Db>) => Promise<T>, channels: (result: T) => readonly string[]): Promise<T> {
    return this.run((db) =>
      db.transaction().execute(async (trx) => {
        const result = await f(trx);
        for (const channel of channels(result)) await sql`SELECT pg_notify(${channel}, ${this.o.schema})`.execute(trx);
        return result;
      }),
    );
  }

  /**
   * Counts one message against the key's current UTC day unless the day already has `limit`:
   * false then, and nothing counted. The upsert's row lock serialises it with the notifier's
   * counting (services/notifier/src/messages.ts), which upserts the same row.
   */
  private async countMessage(trx: Transaction<Db>, keyId: string, limit: number): Promise<boolean> {
    if (limit <= 0) return false;
    const usage = sql.id(this.o.schema, 'webhook_daily_usage');
    const { rows } = await sql<{ messages: number }>`
      INSERT INTO ${usage} AS u (key_id, day, messages) VALUES (${keyId}, (now() AT TIME ZONE 'UTC')::date, 1)
      ON CONFLICT (key_id, day) DO UPDATE SET messages = u.messages + 1 WHERE u.messages < ${limit}
      RETURNING u.messages`.execute(trx);
    return rows.length > 0;
  }

  /** The key's usage of the current UTC day (zeros before its first message). */
  usage(keyId: string): Promise<DailyUsage> {
    const usage = sql.id(this.o.schema, 'webhook_daily_usage');
    return this.run(async (db) => {
      const { rows } = await sql<DailyUsage>`
        SELECT to_char(d.day, 'YYYY-MM-DD') AS day, coalesce(u.messages, 0) AS messages, coalesce(u.dropped, 0) AS dropped
        FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS day) d
        LEFT JOIN ${usage} u ON u.key_id = ${keyId} AND u.day = d.day`.execute(db);
      return rows[0] as DailyUsage;
    });
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
      const lock = `${WEBHOOKS_CHANNEL}:${this.o.schema}:subscriptions:${keyId}`;
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
    }, subscriptionChanged);
  }

  /** Deletes one with its messages (ON DELETE CASCADE); false when the key has no such one. */
  async remove(keyId: string, id: string): Promise<boolean> {
    const gone = await this.write(
      (trx) =>
        trx
          .deleteFrom('webhook_subscriptions')
          .where('id', '=', id)
          .where('key_id', '=', keyId)
          .returning('id')
          .executeTakeFirst(),
      subscriptionChanged,
    );
    return gone !== undefined;
  }

  /**
   * The new sealed secret in; the current one kept, signing too for ROTATION_OVERLAP. Only two
   * sign: a previous one still within its overlap (a second rotation within 24 h) is dropped.
   */
  rotate(keyId: string, id: string, sealed: string): Promise<SubscriptionRow | undefined> {
    return this.write(
      (trx) =>
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
      subscriptionChanged,
    );
  }

  /**
   * Active again: its failure clock and any pause (a receiver's Retry-After) cleared, and its
   * queued (pending) messages due now with a fresh 24 hours of retries (attempts and
   * first_attempt_at start over: the horizon of those queued while it was disabled has passed).
   * The subscription's row is locked first, as the notifier's recording of an outcome does.
   */
  enable(keyId: string, id: string): Promise<SubscriptionRow | undefined> {
    return this.write(
      async (trx) => {
        const row = await trx
          .updateTable('webhook_subscriptions')
          .set({
            status: 'active',
            disabled_reason: null,
            disabled_at: null,
            failing_since: null,
            paused_until: null,
            updated_at: sql<Date>`now()`,
          })
          .where('id', '=', id)
          .where('key_id', '=', keyId)
          .returningAll()
          .executeTakeFirst();
        if (!row) return undefined;
        await trx
          .updateTable('webhook_messages')
          .set({
            attempts: 0,
            first_attempt_at: null,
            next_attempt_at: sql<Date>`least(next_attempt_at, now())`,
          })
          .where('subscription_id', '=', id)
          // A message whose notifier died mid-delivery waits as 'delivering' until its lease
          // expires: it is as queued as a pending one, and gets the same fresh horizon.
          .where((eb) =>
            eb.or([
              eb('status', '=', 'pending'),
              eb.and([eb('status', '=', 'delivering'), eb('lease_until', '<=', sql<Date>`now()`)]),
            ]),
          )
          .execute();
        return row;
      },
      // The notifiers reload it (to serve it again) and wake for its queued messages.
      (row) => (row ? [WEBHOOKS_CHANNEL, WEBHOOK_DUE_CHANNEL] : []),
    );
  }

  /**
   * A message due now for the key's subscription `id`, counted against the key's day: undefined
   * when the key has no such subscription, 'limit' when its day has `dailyLimit` messages.
   */
  enqueueTest(
    keyId: string,
    id: string,
    message: { id: string; body: string },
    dailyLimit: number,
  ): Promise<string | 'limit' | undefined> {
    return this.write(
      async (trx) => {
        const owned = await trx
          .selectFrom('webhook_subscriptions')
          .select('id')
          .where('id', '=', id)
          .where('key_id', '=', keyId)
          .executeTakeFirst();
        if (!owned) return undefined;
        if (!(await this.countMessage(trx, keyId, dailyLimit))) return 'limit';
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
      },
      (made) => (made === undefined || made === 'limit' ? [] : [WEBHOOK_DUE_CHANNEL]),
    );
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
   * starting over, counted against the key's day; one being delivered this moment is left to
   * that attempt (and not counted). Undefined when the key has no such subscription or it no such
   * message; 'limit' when the key's day has `dailyLimit` messages.
   */
  retry(keyId: string, id: string, messageId: string, dailyLimit: number): Promise<MessageRow | 'limit' | undefined> {
    return this.write(
      async (trx) => {
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
        if (!(await this.countMessage(trx, keyId, dailyLimit))) return 'limit';
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
      },
      // One left to its attempt under way was not made due: nothing to wake for.
      (row) => (row !== undefined && row !== 'limit' && row.status === 'pending' ? [WEBHOOK_DUE_CHANNEL] : []),
    );
  }

  async close(): Promise<void> {
    await this.kysely?.destroy();
    this.kysely = undefined;
    this.pool = undefined;
  }
}
