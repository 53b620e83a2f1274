/**
 * API keys: `sp_<prefix>_<secret>`. Only SHA-256(secret) is stored. Every key is held in memory
 * (a snapshot of the table, reloaded when its trigger notifies, see migrations/0002): authentication
 * is a map lookup and a constant-time hash comparison, the same work for an unknown prefix as for a
 * wrong secret, and never a database query per request — so neither the table, nor timing, nor a
 * flood of made-up keys reaches PostgreSQL.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Pool } from '@skinprices/store';
import { ENDPOINT_IDS, PLAN_LIMITS, type EndpointId, type Plan } from './plans.js';

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

interface Row {
  id: string;
  prefix: string;
  secret_sha256: Buffer;
  customer: string;
  plan: Plan;
  allowed_endpoints: string[] | null;
  disabled: boolean;
  expires_at: Date | null;
  per_second: number;
  per_minute: number;
  per_day: number;
  created_at: Date;
  note: string | null;
}

const toKey = (r: Row): ApiKey => ({
  id: r.id,
  prefix: r.prefix,
  customer: r.customer,
  plan: r.plan,
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

export class KeyStore {
  private snapshot: Map<string, { key: ApiKey; hash: Buffer }> | undefined;
  private loadedAt = 0;
  private queue: Promise<void> = Promise.resolve();
  private refreshing: Promise<void> | undefined;
  private listening = false;

  /**
   * @param maxAgeMs while no notification listener keeps the snapshot current (the CLI, tests
   * without one, a lost connection), a snapshot older than this is reloaded before use. @default 5000
   */
  constructor(
    private readonly pool: Pool,
    private readonly maxAgeMs = 5_000,
  ) {}

  /** Reloads every key; queued after any reload under way, so it sees every change committed before it. */
  reload(): Promise<void> {
    const load = async () => {
      const { rows } = await this.pool.query<Row>('SELECT * FROM api_keys');
      this.snapshot = new Map(rows.map((r) => [r.prefix, { key: toKey(r), hash: r.secret_sha256 }]));
      this.loadedAt = Date.now();
    };
    this.queue = this.queue.then(load, load);
    return this.queue;
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
    const { rows } = await this.pool.query<Row>(
      `INSERT INTO api_keys (prefix, secret_sha256, customer, plan, allowed_endpoints, disabled, expires_at,
                             per_second, per_minute, per_day, note)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
      [
        prefix,
        sha256(secret),
        input.customer,
        input.plan,
        input.allowedEndpoints ?? null,
        input.disabled ?? false,
        input.expiresAt ?? null,
        input.perSecond ?? limits.perSecond,
        input.perMinute ?? limits.perMinute,
        input.perDay ?? limits.perDay,
        input.note ?? null,
      ],
    );
    await this.reload();
    return { key: toKey(rows[0] as Row), secret };
  }

  async list(): Promise<ApiKey[]> {
    const { rows } = await this.pool.query<Row>('SELECT * FROM api_keys ORDER BY id');
    return rows.map(toKey);
  }

  async update(
    prefix: string,
    change: { disabled?: boolean; expiresAt?: Date | null; allowedEndpoints?: EndpointId[] | null },
  ): Promise<ApiKey | null> {
    const { rows } = await this.pool.query<Row>(
      `UPDATE api_keys SET
         disabled = coalesce($2, disabled),
         expires_at = CASE WHEN $3 THEN $4 ELSE expires_at END,
         allowed_endpoints = CASE WHEN $5 THEN $6 ELSE allowed_endpoints END
       WHERE prefix = $1 RETURNING *`,
      [
        prefix,
        change.disabled ?? null,
        change.expiresAt !== undefined,
        change.expiresAt ?? null,
        change.allowedEndpoints !== undefined,
        change.allowedEndpoints ?? null,
      ],
    );
    await this.reload();
    return rows[0] ? toKey(rows[0]) : null;
  }

  /** The key presented, or why it is refused (every refusal is a 401). */
  async authenticate(presented: string | undefined, now = Date.now()): Promise<ApiKey | AuthFailure> {
    if (!presented) return 'missing';
    const m = KEY.exec(presented);
    if (!m) return 'invalid';
    if (!this.snapshot || (!this.listening && now - this.loadedAt > this.maxAgeMs)) {
      this.refreshing ??= this.reload().finally(() => (this.refreshing = undefined));
      // With a snapshot in hand, a failed reload (PostgreSQL away) keeps serving the last one.
      if (this.snapshot) await this.refreshing.catch(() => undefined);
      else await this.refreshing;
    }
    const hit = this.snapshot?.get(m[1] as string);
    // An unknown prefix still costs the hash and a comparison, so its timing matches a wrong secret's.
    const match = timingSafeEqual(sha256(presented), hit?.hash ?? NO_KEY);
    if (!hit || !match) return 'invalid';
    if (hit.key.disabled) return 'disabled';
    if (hit.key.expiresAt && hit.key.expiresAt.getTime() <= now) return 'expired';
    return hit.key;
  }
}
