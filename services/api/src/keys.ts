/**
 * API keys: `sp_<prefix>_<secret>`. Only SHA-256(secret) is stored. Every key is held in memory
 * (a snapshot of the table, reloaded when its trigger notifies, see migrations/0002): authentication
 * is a map lookup and a constant-time hash comparison, the same work for an unknown prefix as for a
 * wrong secret, and never a database query per request — so neither the table, nor timing, nor a
 * flood of made-up keys reaches PostgreSQL.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Contract, DatabaseOf, Pool } from '@skinprices/store';
import { Kysely, PostgresDialect, type Generated, type Selectable } from 'kysely';
import { ENDPOINT_IDS, PLAN_LIMITS, type EndpointId, type Plan } from './plans.js';

/**
 * The API's own table (its migrations, in the keys schema) as the queries below may use it;
 * test/integration/read-contract.test.ts checks it against the migrated table.
 */
export const KEYS_CONTRACT = {
  api_keys: {
    id: 'bigint',
    prefix: 'text',
    secret_sha256: 'bytea',
    customer: 'text',
    plan: 'text',
    allowed_endpoints: 'text[]?',
    disabled: 'boolean',
    expires_at: 'timestamptz?',
    per_second: 'integer',
    per_minute: 'integer',
    per_day: 'integer',
    created_at: 'timestamptz',
    note: 'text?',
  },
  /** Bumped by the key table's trigger in the changing transaction (migration 0003). */
  api_key_version: { only_row: 'boolean', version: 'bigint' },
} as const satisfies Contract;
type KeysRow = DatabaseOf<typeof KEYS_CONTRACT>['api_keys'];
/** Kysely's view of it: the database fills id and created_at. */
interface KeysDb {
  api_keys: Omit<KeysRow, 'id' | 'created_at'> & { id: Generated<string>; created_at: Generated<Date> };
  api_key_version: DatabaseOf<typeof KEYS_CONTRACT>['api_key_version'];
}
type Row = Selectable<KeysDb['api_keys']>;

export interface ApiKey {
  id: string;
  prefix: string;
  customer: string;
  plan: Plan;
  allowedEndpoints: EndpointId[] | null;
  disabled: boolean;
  expiresAt: Date | null;
  perSecond: number;
  perMinute: number;
  perDay: number;
  createdAt: Date;
  note: string | null;
}

export type AuthFailure = 'missing' | 'invalid' | 'disabled' | 'expired';

const KEY = /^sp_([a-z0-9]{10})_([A-Za-z0-9_-]{32,64})$/;
const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();
const NO_KEY = Buffer.alloc(32);

const toKey = (r: Row): ApiKey => ({
  id: r.id,
  prefix: r.prefix,
  customer: r.customer,
  // The table's CHECK holds plan to the three plans.
  plan: r.plan as Plan,
  allowedEndpoints: r.allowed_endpoints as EndpointId[] | null,
  disabled: r.disabled,
  expiresAt: r.expires_at,
  perSecond: r.per_second,
  perMinute: r.per_minute,
  perDay: r.per_day,
  createdAt: r.created_at,
  note: r.note,
});

export interface CreateKeyInput {
  customer: string;
  plan: Plan;
  allowedEndpoints?: EndpointId[] | null;
  expiresAt?: Date | null;
  disabled?: boolean;
  perSecond?: number;
  perMinute?: number;
  perDay?: number;
  note?: string;
}

/** Verified secrets remembered at most (see KeyStore.verified); beyond, the memo starts over. */
const MAX_VERIFIED = 10_000;

export class KeyStore {
  private snapshot: Map<string, { key: ApiKey; hash: Buffer }> | undefined;
  /**
   * Secrets already verified against the snapshot, with the entry they matched: a key presented
   * again skips the hash (a SHA-256 per request was a tenth of a small answer's cost). Only exact
   * secrets that matched are held, so a hit tells a caller nothing it did not already know; a new
   * snapshot starts it empty.
   */
  private verified = new Map<string, { key: ApiKey; hash: Buffer }>();
  /** When the snapshot was last known current: loaded, or its version read unchanged. */
  private currentAt = 0;
  /** The key version the snapshot was loaded at (read before the rows: never newer than them). */
  private version: string | undefined;
  private queue: Promise<void> = Promise.resolve();
  private refreshing: Promise<void> | undefined;
  private listening = false;

  /**
   * @param maxAgeMs while no notification listener keeps the snapshot current (the CLI, tests
   * without one, a lost connection), a snapshot not known current for this long (neither loaded
   * nor confirmed by refreshIfChanged) is reloaded before use. @default 5000
   */
  private readonly db: Kysely<KeysDb>;

  constructor(
    pool: Pool,
    private readonly maxAgeMs = 5_000,
  ) {
    this.db = new Kysely<KeysDb>({ dialect: new PostgresDialect({ pool }) });
  }

  /** Reloads every key; queued after any reload under way, so it sees every change committed before it. */
  reload(): Promise<void> {
    const load = async () => {
      const at = Date.now();
      const version = await this.readVersion();
      const rows = await this.db.selectFrom('api_keys').selectAll().execute();
      this.snapshot = new Map(rows.map((r) => [r.prefix, { key: toKey(r), hash: r.secret_sha256 }]));
      this.verified = new Map();
      this.version = version;
      this.currentAt = at;
    };
    this.queue = this.queue.then(load, load);
    return this.queue;
  }

  /**
   * Reloads when the key version moved since the snapshot was loaded; otherwise only notes that the
   * snapshot is current. Polled where no notification arrives (a hot standby refuses LISTEN): one
   * single-row read instead of every key. Returns the version now held.
   */
  async refreshIfChanged(): Promise<string | undefined> {
    const at = Date.now();
    const version = await this.readVersion();
    if (this.snapshot === undefined || version !== this.version) await this.reload();
    else this.currentAt = Math.max(this.currentAt, at);
    return this.version;
  }

  private async readVersion(): Promise<string> {
    const row = await this.db.selectFrom('api_key_version').select('version').executeTakeFirstOrThrow();
    return row.version;
  }

  /** A notification listener keeps the snapshot current while `on` (see PgNotifications). */
  setListening(on: boolean): void {
    this.listening = on;
  }

  /** Creates a key; the returned secret is shown once and never stored. */
  async create(input: CreateKeyInput): Promise<{ key: ApiKey; secret: string }> {
    for (const e of input.allowedEndpoints ?? [])
      if (!ENDPOINT_IDS.includes(e)) throw new Error(`unknown endpoint '${e}' (one of: ${ENDPOINT_IDS.join('; ')})`);
    const prefix = randomBytes(8).toString('hex').slice(0, 10);
    const secret = `sp_${prefix}_${randomBytes(32).toString('base64url')}`;
    const limits = PLAN_LIMITS[input.plan];
    const row = await this.db
      .insertInto('api_keys')
      .values({
        prefix,
        secret_sha256: sha256(secret),
        customer: input.customer,
        plan: input.plan,
        allowed_endpoints: input.allowedEndpoints ?? null,
        disabled: input.disabled ?? false,
        expires_at: input.expiresAt ?? null,
        per_second: input.perSecond ?? limits.perSecond,
        per_minute: input.perMinute ?? limits.perMinute,
        per_day: input.perDay ?? limits.perDay,
        note: input.note ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await this.reload();
    return { key: toKey(row), secret };
  }

  async list(): Promise<ApiKey[]> {
    const rows = await this.db.selectFrom('api_keys').selectAll().orderBy('id').execute();
    return rows.map(toKey);
  }

  async update(
    prefix: string,
    change: { disabled?: boolean; expiresAt?: Date | null; allowedEndpoints?: EndpointId[] | null },
  ): Promise<ApiKey | null> {
    const set = {
      ...(change.disabled !== undefined ? { disabled: change.disabled } : {}),
      ...(change.expiresAt !== undefined ? { expires_at: change.expiresAt } : {}),
      ...(change.allowedEndpoints !== undefined ? { allowed_endpoints: change.allowedEndpoints } : {}),
    };
    // Nothing to change is a look-up (an UPDATE needs at least one column).
    const row =
      Object.keys(set).length === 0
        ? await this.db.selectFrom('api_keys').selectAll().where('prefix', '=', prefix).executeTakeFirst()
        : await this.db.updateTable('api_keys').set(set).where('prefix', '=', prefix).returningAll().executeTakeFirst();
    await this.reload();
    return row ? toKey(row) : null;
  }

  /**
   * The key of a secret already verified against the current snapshot, usable now; undefined when
   * that takes more (a first sight, a snapshot due for reload) or the key is refused: authenticate.
   */
  verifiedNow(presented: string | undefined, now = Date.now()): ApiKey | undefined {
    if (!presented || !this.snapshot || (!this.listening && now - this.currentAt > this.maxAgeMs)) return undefined;
    const key = this.verified.get(presented)?.key;
    if (!key || key.disabled || (key.expiresAt && key.expiresAt.getTime() <= now)) return undefined;
    return key;
  }

  /** The key presented, or why it is refused (every refusal is a 401). */
  async authenticate(presented: string | undefined, now = Date.now()): Promise<ApiKey | AuthFailure> {
    if (!presented) return 'missing';
    const m = KEY.exec(presented);
    if (!m) return 'invalid';
    if (!this.snapshot || (!this.listening && now - this.currentAt > this.maxAgeMs)) {
      this.refreshing ??= this.reload().finally(() => (this.refreshing = undefined));
      // With a snapshot in hand, a failed reload (PostgreSQL away) keeps serving the last one.
      if (this.snapshot) await this.refreshing.catch(() => undefined);
      else await this.refreshing;
    }
    const hit = this.snapshot?.get(m[1] as string);
    if (!hit || this.verified.get(presented) !== hit) {
      // An unknown prefix still costs the hash and a comparison, so its timing matches a wrong secret's.
      const match = timingSafeEqual(sha256(presented), hit?.hash ?? NO_KEY);
      if (!hit || !match) return 'invalid';
      if (this.verified.size >= MAX_VERIFIED) this.verified.clear();
      this.verified.set(presented, hit);
    }
    if (hit.key.disabled) return 'disabled';
    if (hit.key.expiresAt && hit.key.expiresAt.getTime() <= now) return 'expired';
    return hit.key;
  }
}
