/**
 * API keys: `sp_<prefix>_<secret>`. Only SHA-256(secret) is stored; authentication finds the row
 * by prefix and compares hashes in constant time, so neither the table nor timing reveals a key.
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
  /** Authenticated keys, briefly: a request must not cost a database round trip. */
  private readonly cache = new Map<string, { key: ApiKey; hash: Buffer; until: number }>();

  constructor(
    private readonly pool: Pool,
    private readonly cacheMs = 5_000,
  ) {}

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
    this.cache.clear();
    return rows[0] ? toKey(rows[0]) : null;
  }

  /** The key presented, or why it is refused (every refusal is a 401). */
  async authenticate(presented: string | undefined, now = Date.now()): Promise<ApiKey | AuthFailure> {
    if (!presented) return 'missing';
    const m = KEY.exec(presented);
    if (!m) return 'invalid';
    const prefix = m[1] as string;
    const hash = sha256(presented);
    let hit = this.cache.get(prefix);
    if (!hit || hit.until < now) {
      const { rows } = await this.pool.query<Row>('SELECT * FROM api_keys WHERE prefix = $1', [prefix]);
      hit = rows[0] ? { key: toKey(rows[0]), hash: rows[0].secret_sha256, until: now + this.cacheMs } : undefined;
      if (hit) this.cache.set(prefix, hit);
    }
    // An unknown prefix still costs a comparison, so its timing matches a wrong secret's.
    const match = timingSafeEqual(hash, hit?.hash ?? NO_KEY);
    if (!hit || !match) return 'invalid';
    if (hit.key.disabled) return 'disabled';
    if (hit.key.expiresAt && hit.key.expiresAt.getTime() <= now) return 'expired';
    return hit.key;
  }
}
