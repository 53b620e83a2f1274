import { commonEnv, intFromEnv } from '@skinprices/runtime';
import { SecretBox } from '@skinprices/webhooks';
import { z } from 'zod';

const schemaName = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/);

/** A key ring SecretBox accepts (checked at start: a typo must not wait for the first webhook request). */
function validRing(ring: string | undefined): boolean {
  if (ring === undefined) return true;
  try {
    SecretBox.parseRing(ring);
    return true;
  } catch {
    return false;
  }
}

export const apiConfigSchema = z
  .object({
    ...commonEnv,
    API_HOST: z.string().default('127.0.0.1').describe('interface to listen on'),
    API_PORT: intFromEnv(0, 65_535).default(8080).describe('HTTP port'),
    DATABASE_SCHEMA: schemaName.default('readmodel').describe("the materializer's read-model schema"),
    KEYS_SCHEMA: schemaName.default('api').describe('schema of the API keys (never replayed or swapped)'),
    API_PROCESSES: z
      .union([z.literal('auto'), intFromEnv(1, 64)])
      .default('auto')
      .describe(
        'API processes on this machine, sharing API_PORT (node:cluster); auto: one per core. With more than one, rate limits are counted in Redis when REDIS_URL is set, else by the cluster primary',
      ),
    REDIS_URL: z
      .string()
      .url()
      .optional()
      .describe(
        'rate limits shared by API processes on several machines (e.g. redis://127.0.0.1:6379); unset: in memory, shared by the processes of one machine through their cluster primary',
      ),
    STALE_GRACE_S: intFromEnv(0, 86_400)
      .default(60)
      .describe(
        '/v1/status: a kind is stale when its last complete cycle was applied over 2 × its refresh interval + this ago',
      ),
    MATERIALIZER_DEAD_AFTER_S: intFromEnv(5, 3_600)
      .default(30)
      .describe('/v1/status: a materializer whose heartbeat is older is dead (it beats every 5 s)'),
    PIPELINE_STALL_AFTER_S: intFromEnv(10, 86_400)
      .default(90)
      .describe('/v1/status: no batch committed by any materializer for this long means the pipeline stalled'),
    DERIVED_MAX_LAG_MS: intFromEnv(0, 300_000)
      .default(15_000)
      .describe(
        'how long cached answers may lag behind derived values (statistics, liquidity, market cap) that every cycle marker recomputes; price changes and removals are not delayed',
      ),
    CHANGE_POLL_MS: intFromEnv(10, 10_000)
      .default(250)
      .describe(
        "how often the read model's change position and the key version are read (a NOTIFY reads them at once where LISTEN works; on a hot standby this is how changes arrive)",
      ),
    DB_LISTEN: z
      .enum(['auto', 'true', 'false'])
      .default('auto')
      .describe(
        "LISTEN for the materializer's and the key table's notifications, which make changes and key edits visible at once rather than at the next poll; auto: unless the database is a hot standby (which refuses LISTEN)",
      ),
    REPLICA_MAX_LAG_S: intFromEnv(1, 86_400)
      .default(10)
      .describe('/v1/status degrades when the database is a standby further behind its primary than this'),
    SCHEMA_WAIT_S: intFromEnv(0, 86_400)
      .default(600)
      .describe(
        'at start, how long to wait for the read model and key tables this version reads (the materializer and keys-cli migrate them; the API never writes) before exiting',
      ),
    DB_POOL_SIZE: intFromEnv(1, 100).default(8).describe('PostgreSQL connections for reads'),
    DB_APPLICATION_NAME: z
      .string()
      .regex(/^[a-z0-9_-]{1,48}$/)
      .default('api')
      .describe(
        "application_name of the read connections (the key connections add '-keys'): tells processes apart in pg_stat_activity",
      ),
    WHOLE_READS_AT_ONCE: intFromEnv(1, 64)
      .default(2)
      .describe(
        'whole-marketplace reads at once (list bodies built or rebuilt, catalogue shards): the others wait their turn, patches never do; keeps read connections free and one heap of rows at a time',
      ),
    DB_ACQUIRE_TIMEOUT_MS: intFromEnv(1, 600_000)
      .default(10_000)
      .describe('the longest a request waits for a free read connection before it is answered 503 (busy)'),
    AUTH_FAILURES_PER_MINUTE: intFromEnv(1, 1_000_000)
      .default(60)
      .describe('failed authentications a client address may have per minute before its requests get 429'),
    WEBHOOKS_DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
      .optional()
      .describe(
        'where webhook subscriptions are written (the primary), when DATABASE_URL is a hot standby; unset: DATABASE_URL. Connected on the first webhook request only',
      ),
    WEBHOOKS_SCHEMA: schemaName
      .default('webhooks')
      .describe("the notifier's webhooks schema (subscriptions, deliveries); the notifier migrates it"),
    WEBHOOK_SECRET_KEYS: z
      .string()
      .optional()
      .refine(validRing, 'must be a key ring: <kid>:<base64 of 32 bytes>[,<kid>:<base64 of 32 bytes>…]')
      .describe(
        "keys that seal webhook signing secrets at rest, the notifier's WEBHOOK_SECRET_KEYS: '<kid>:<base64 of 32 bytes>', comma-separated, the first sealing and every one opening (rotation: put the new key first). Unset: the webhook endpoints answer 503 webhooks_unavailable",
      ),
    WEBHOOK_ALLOW_PRIVATE_URLS: z
      .enum(['true', 'false'])
      .default('false')
      .transform((v) => v === 'true')
      .describe(
        'accept webhook URLs on loopback, private and link-local addresses (local runs and tests only: on a server they reach its own network)',
      ),
    METRICS_HOST: z.string().default('127.0.0.1').describe('where /metrics listens (never the public port)'),
    METRICS_PORT: intFromEnv(0, 65_535).optional().describe('Prometheus /metrics port; unset: no endpoint'),
  })
  .refine((c) => c.WHOLE_READS_AT_ONCE < c.DB_POOL_SIZE, {
    // Whole reads holding every read connection is what the slots are for: status, patches and
    // one item's reads must always find one.
    message: 'WHOLE_READS_AT_ONCE must be below DB_POOL_SIZE',
    path: ['WHOLE_READS_AT_ONCE'],
  });
export type ApiConfig = z.infer<typeof apiConfigSchema>;

export const MIGRATIONS_DIR = new URL('../migrations/', import.meta.url).pathname;
