/**
 * The webhook endpoints' request and answer schemas: Fastify validates bodies and parameters with
 * them, serialises answers with them, and @fastify/swagger publishes them. The filters' rules
 * beyond their shape (marketplace slugs, decimals above zero) are @skinprices/webhooks'
 * filtersSchema, which the routes apply after these.
 */
import { LISTING_MARKETS } from '../routes/exposure.js';
import { Type, type TSchema } from 'typebox';
import { closed, keyFields, responses, Ts, TsOrNull } from '../routes/schemas.js';

const StrOrNull = (description: string) => Type.Unsafe<string | null>({ type: ['string', 'null'], description });
const IntOrNull = (description: string) => Type.Unsafe<number | null>({ type: ['integer', 'null'], description });
const DECIMAL = '^\\d+(\\.\\d+)?$';

const Filters = closed(
  {
    markets: Type.Optional(
      Type.Array(Type.Unsafe<string>({ type: 'string', enum: LISTING_MARKETS.map((m) => m.slug) }), {
        minItems: 1,
        maxItems: LISTING_MARKETS.length,
        description: 'only changes on these marketplaces (absent: every listing marketplace)',
      }),
    ),
    items: Type.Optional(
      Type.Array(
        closed({
          market_hash_name: Type.String({ minLength: 1, maxLength: 512 }),
          phase: Type.Optional(
            Type.String({ maxLength: 64, description: 'absent: any phase; "" only the item without a phase' }),
          ),
        }),
        { minItems: 1, maxItems: 1000, description: 'only changes of these items (absent: every item)' },
      ),
    ),
    min_change_pct: Type.Optional(
      Type.String({
        pattern: DECIMAL,
        description:
          'decimal string above 0: only price changes of at least this many percent of the old price (|new − old| / old); a price appearing or vanishing counts as 100 %; count-only changes never pass',
      }),
    ),
    crosses: Type.Optional(
      closed(
        {
          price: Type.String({ pattern: DECIMAL, description: "the threshold, in the marketplace's currency" }),
          direction: Type.Unsafe<'down' | 'up' | 'any'>({
            type: 'string',
            enum: ['down', 'up', 'any'],
            description:
              'down: the new price is at or below the threshold and the old one was above it (or absent); up: at or above, from below (or absent); any: either',
          }),
        },
        'only changes whose price crosses a threshold',
      ),
    ),
    include_count_changes: Type.Optional(
      Type.Boolean({
        description: 'also send changes of the listing count alone, the price unchanged (default false)',
      }),
    ),
  },
  'Which changes are sent; every condition given must hold (absent: every price change)',
);

const Batch = closed(
  {
    max_events: Type.Integer({
      minimum: 1,
      maximum: 100,
      default: 1,
      description: 'changes per delivery at most; 1 (the default): one delivery per change',
    }),
    window_ms: Type.Integer({
      minimum: 0,
      maximum: 60_000,
      default: 0,
      description: 'how long a batch may wait for more changes after its first (a full batch goes at once)',
    }),
  },
  'Batching: many changes in one delivery (type price.changed.batch)',
);

export const CreateBody = closed({
  url: Type.String({
    minLength: 1,
    maxLength: 2048,
    description:
      'where deliveries are POSTed: http or https, no user name or password, no fragment; not on a loopback, private or link-local address',
  }),
  description: Type.Optional(Type.String({ maxLength: 500, default: '', description: 'yours to recognise it by' })),
  filters: Type.Optional(Filters),
  batch: Type.Optional(Batch),
});

const STATUSES = ['active', 'disabled'];
const Subscription = closed({
  id: Type.String({ description: "'wh_' and 26 characters" }),
  url: Type.String(),
  description: Type.String(),
  filters: Filters,
  batch: Batch,
  status: Type.Unsafe<string>({
    type: 'string',
    enum: STATUSES,
    description:
      'disabled: after 24 h of failed deliveries (disabled_reason says why); no changes are matched for it while disabled (none are queued); enable it again to resume its queued deliveries',
  }),
  disabled_reason: StrOrNull('why it was disabled; null when active'),
  disabled_at: TsOrNull,
  failing_since: { ...TsOrNull, description: 'the first failed delivery since the last success; null when none' },
  created_at: Ts,
  updated_at: Ts,
  secret_rotated_until: {
    ...TsOrNull,
    description: 'until when the secret before the last rotation still signs deliveries too; null: only the current',
  },
});
const Secret = Type.String({
  pattern: '^whsec_',
  description: "the signing secret ('whsec_' and base64 of 32 bytes): shown only here, store it",
});

const MESSAGE_STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;
const Delivery = closed({
  id: Type.String({ description: "the message id ('msg_…'), sent as webhook-id: the same on every attempt" }),
  type: Type.Unsafe<string>({ type: 'string', enum: ['price.changed', 'price.changed.batch', 'webhook.test'] }),
  status: Type.Unsafe<string>({
    type: 'string',
    enum: [...MESSAGE_STATUSES],
    description:
      'pending: waiting for its next attempt; delivering: being sent; succeeded; failed: retries exhausted or a non-retryable answer',
  }),
  attempts: Type.Integer(),
  event_count: Type.Integer({ description: 'changes in it (1 unless batched)' }),
  created_at: Ts,
  committed_at: { ...Ts, description: 'when the (first) change was committed: latency is measured from here' },
  next_attempt_at: { ...TsOrNull, description: 'when it is due while pending; null otherwise' },
  last_attempt_at: TsOrNull,
  last_status_code: IntOrNull("the receiver's HTTP status at the last attempt; null without an answer"),
  last_error: StrOrNull('what went wrong at the last attempt (up to 256 characters of the answer)'),
  delivered_at: TsOrNull,
  latency_ms: IntOrNull(
    'from committed_at to the 2xx answer; for a retried delivery too, so it includes the time before the retry',
  ),
});

const IdPath = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, description: "the subscription's id ('wh_…')" }),
});
const MessagePath = Type.Object({
  id: IdPath.properties.id,
  message_id: Type.String({ minLength: 1, maxLength: 64, description: "the message's id ('msg_…')" }),
});

/** Statuses every webhook endpoint answers beyond the common ones (or says more precisely). */
const MORE: Record<number, string> = {
  403: "plan_required (webhooks need pro) or endpoint_not_allowed (the key's ACL)",
  404: 'no such subscription of this key (another key\u2019s is not found either), or route',
  503: 'webhooks_unavailable: webhooks are not configured on this server, not set up yet, or their database is unreachable or misconfigured (the message says which); not_available: a conflict with a concurrent request, or every connection busy. Retry-After says when to retry',
};
/** A test or retry past the key's daily limit. */
const DAILY_429 =
  "rate_limited or auth_rate_limited (as every endpoint), or webhook_daily_limit: the key has had its plan's deliveries of the UTC day (pro 100,000, enterprise 2,000,000); Retry-After: seconds until the next UTC day";
const answer = (data: TSchema) => closed({ data, ...keyFields });

export const CREATE = {
  summary:
    'Subscribe an HTTP endpoint to price changes: each matching change is POSTed to it, signed (Standard Webhooks). The answer holds the signing secret, once',
  body: CreateBody,
  response: responses({
    ok: answer(closed({ ...Subscription.properties, secret: Secret })),
    okStatus: 201,
    okDescription: 'Created',
    body: true,
    more: {
      ...MORE,
      400: 'bad body: the message names the field (url and why it is refused, filters.<field>, batch.<field>)',
      403: `${MORE[403]}, or webhook_limit: the key has its plan's number of subscriptions (pro 10, enterprise 100)`,
    },
  }),
};
const Usage = closed(
  {
    day: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'the current UTC day, YYYY-MM-DD' }),
    messages: Type.Integer({
      minimum: 0,
      description: 'deliveries made today: matched changes (or batches), tests and retries',
    }),
    dropped: Type.Integer({
      minimum: 0,
      description: 'changes matched today past the limit: neither sent nor kept in the delivery log',
    }),
    limit: Type.Integer({ description: "the plan's deliveries per key and UTC day" }),
  },
  "The key's deliveries of the current UTC day against its plan's daily limit (every subscription of the key together)",
);
export const LIST = {
  summary: "The key's webhook subscriptions, oldest first (no secrets), and its deliveries of the day",
  response: responses({ ok: closed({ data: Type.Array(Subscription), usage: Usage, ...keyFields }), more: MORE }),
};
export const GET_ONE = {
  summary: 'One webhook subscription (no secret)',
  params: IdPath,
  response: responses({ ok: answer(Subscription), more: MORE }),
};
export const DELETE = {
  summary: 'Delete a webhook subscription and its delivery log: nothing more is sent to it',
  params: IdPath,
  response: responses({ ok: null, okStatus: 204, okDescription: 'Deleted', more: MORE }),
};
export const ROTATE = {
  summary:
    'A new signing secret; the previous one keeps signing too for 24 hours (each delivery carries both signatures), so receivers can switch without losing one. Only the current and the immediately previous secret sign: rotating again within the 24 hours drops the older one at once',
  params: IdPath,
  response: responses({
    ok: answer(
      closed({
        secret: Secret,
        previous_valid_until: { ...Ts, description: 'until when the previous secret signs too' },
      }),
    ),
    more: MORE,
  }),
};
export const ENABLE = {
  summary:
    'Enable a subscription again (after 24 h of failures disabled it): changes are matched for it again from now, and its queued deliveries resume with a fresh 24 hours of retries',
  params: IdPath,
  response: responses({ ok: answer(Subscription), more: MORE }),
};
export const TEST = {
  summary:
    "Send a test delivery (type webhook.test) now; its result shows in the subscription's deliveries. It counts against the key's daily limit",
  params: IdPath,
  response: responses({
    ok: answer(closed({ message_id: Type.String() })),
    okStatus: 202,
    okDescription: 'Accepted: the delivery is due now',
    more: { ...MORE, 429: DAILY_429 },
  }),
};
export const DELIVERIES = {
  summary: "The subscription's deliveries, newest first, a page at a time: status, attempts, last error, latency",
  params: IdPath,
  querystring: Type.Object({
    status: Type.Optional(Type.Unsafe<string>({ type: 'string', enum: [...MESSAGE_STATUSES] })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'deliveries per page' })),
    before: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'a message id of an earlier page (its next_before): the deliveries older than it',
      }),
    ),
  }),
  response: responses({
    ok: closed({
      data: Type.Array(Delivery),
      has_more: Type.Boolean(),
      next_before: StrOrNull('the next page: before=<this>; null on the last page'),
      ...keyFields,
    }),
    more: { ...MORE, 400: 'bad parameter; before: not a message of this subscription' },
  }),
};
export const RETRY = {
  summary:
    "Send a delivery again, now (a failed or even a succeeded one); its attempts and 24 hours of retries start over, and it counts against the key's daily limit. One being sent at this moment is left to that attempt",
  params: MessagePath,
  response: responses({
    ok: answer(Delivery),
    okStatus: 202,
    okDescription: 'Accepted: the delivery is due now',
    more: { ...MORE, 404: 'no such subscription of this key, or no such message of it', 429: DAILY_429 },
  }),
};
