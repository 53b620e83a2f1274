/**
 * The webhook management endpoints (/v1/webhooks…, plan pro): a key's subscriptions, their
 * secrets, test deliveries and delivery log, and its daily usage. The notifier (services/notifier)
 * delivers; these only write what it reads, and wake it (store.ts). Tests and retries count
 * against the key's daily delivery limit as the notifier's matches do. Unlike every other route
 * they write, so they answer only where configured: without WEBHOOK_SECRET_KEYS, 503
 * webhooks_unavailable; with their database unreachable or misconfigured, 503 too (store.ts).
 *
 * A signing secret is returned twice at most in its life: when made (create, rotate-secret). At
 * rest it is sealed under the operator's key ring with the subscription id as associated data
 * (SecretBox), so a sealed secret copied onto another row does not open.
 */
import {
  checkWebhookUrl,
  filtersSchema,
  generateSecret,
  newSubscriptionId,
  SecretBox,
  testBody,
  testMessageId,
  WEBHOOK_LIMITS,
} from '@skinprices/webhooks';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import { ApiError, badParameter } from '../errors.js';
import type { ApiKey } from '../keys.js';
import { keyFieldsOf, keyOf, sendObject, VARY } from '../routes/send.js';
import { CREATE, CreateBody, DELETE, DELIVERIES, ENABLE, GET_ONE, LIST, RETRY, ROTATE, TEST } from './schemas.js';
import { WebhookStore, type MessageRow, type SubscriptionRow } from './store.js';

/** Where webhooks are written and how secrets are sealed (AppDeps.webhooks; serve.ts from the config). */
export interface WebhookSettings {
  /** Where subscriptions are written: the primary (WEBHOOKS_DATABASE_URL, else DATABASE_URL). */
  databaseUrl: string;
  /** The notifier's schema (WEBHOOKS_SCHEMA). */
  schema: string;
  /** The key ring that seals signing secrets (WEBHOOK_SECRET_KEYS); unset: the endpoints answer 503. */
  secretKeys?: string;
  /** Accept URLs on loopback and private addresses (local runs, tests). @default false */
  allowPrivateUrls?: boolean;
  /** application_name of the connections. @default 'api-webhooks' */
  applicationName?: string;
}

type CreateInput = {
  url: string;
  description: string;
  filters?: unknown;
  batch?: { max_events: number; window_ms: number };
};
type IdParams = { id: string };
type DeliveriesQuery = { status?: string; limit?: number; before?: string };

/** Answers that name their key are no one else's: never stored by a cache (send.ts adds Vary). */
const NO_STORE = 'no-store';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** A subscription as customers see it (never its secrets). */
function subscriptionJson(r: SubscriptionRow, now = Date.now()) {
  return {
    id: r.id,
    url: r.url,
    description: r.description,
    filters: r.filters as object,
    batch: { max_events: r.batch_max, window_ms: r.batch_window_ms },
    status: r.status,
    disabled_reason: r.disabled_reason,
    disabled_at: iso(r.disabled_at),
    failing_since: iso(r.failing_since),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    secret_rotated_until:
      r.previous_secret_until && r.previous_secret_until.getTime() > now ? r.previous_secret_until.toISOString() : null,
  };
}

function deliveryJson(m: MessageRow) {
  return {
    id: m.id,
    type: m.type,
    status: m.status,
    attempts: m.attempts,
    event_count: m.event_count,
    created_at: m.created_at.toISOString(),
    committed_at: m.committed_at.toISOString(),
    next_attempt_at: m.status === 'pending' ? m.next_attempt_at.toISOString() : null,
    last_attempt_at: iso(m.last_attempt_at),
    last_status_code: m.last_status_code,
    last_error: m.last_error,
    delivered_at: iso(m.delivered_at),
    latency_ms: m.latency_ms,
  };
}

/**
 * The first property of `value` its closed `schema` does not name, as a dotted path. Ajv drops
 * such properties silently (validation.ts: removeAdditional); a subscription made without a
 * misspelt filter would send every change, so these bodies refuse them instead.
 */
function unknownField(value: unknown, schema: TSchema, path = ''): string | undefined {
  const s = schema as { properties?: Record<string, TSchema>; additionalProperties?: unknown; items?: TSchema };
  const at = (k: string | number) => (path ? `${path}.${k}` : String(k));
  if (Array.isArray(value) && s.items) {
    for (const [i, v] of value.entries()) {
      const found = unknownField(v, s.items, at(i));
      if (found) return found;
    }
    return undefined;
  }
  if (value === null || typeof value !== 'object' || !s.properties) return undefined;
  for (const [k, v] of Object.entries(value)) {
    const child = s.properties[k];
    if (!child) {
      if (s.additionalProperties === false) return at(k);
      continue;
    }
    const found = unknownField(v, child, at(k));
    if (found) return found;
  }
  return undefined;
}

const notFound = (id: string) =>
  new ApiError(404, 'not_found', `no webhook subscription '${id.slice(0, 64)}' of this key`);

const unavailable = () =>
  new ApiError(
    503,
    'webhooks_unavailable',
    'webhooks are not configured on this server (the operator sets WEBHOOK_SECRET_KEYS)',
    { 'retry-after': '300' },
  );

/** The routes' shared parts: the store and the secret box, or the 503 of an unconfigured server. */
class Webhooks {
  private readonly store: WebhookStore;
  private readonly box: SecretBox | undefined;

  constructor(readonly settings: WebhookSettings | undefined) {
    this.store = new WebhookStore({
      databaseUrl: settings?.databaseUrl ?? '',
      schema: settings?.schema ?? 'webhooks',
      applicationName: settings?.applicationName,
    });
    this.box = settings?.secretKeys ? new SecretBox(settings.secretKeys) : undefined;
  }

  /** The store and box, or 503 when webhooks are not configured. */
  ready(): { store: WebhookStore; box: SecretBox } {
    if (!this.settings || !this.box) throw unavailable();
    return { store: this.store, box: this.box };
  }

  close = () => this.store.close();
}

/** The key's plan limit of subscriptions (basic never gets here: the plan gate is first). */
const subscriptionLimit = (key: ApiKey): number => (key.plan === 'basic' ? 0 : WEBHOOK_LIMITS[key.plan].subscriptions);

/** The key's plan limit of messages per UTC day: changes matched, tests and retries together. */
const dailyLimit = (key: ApiKey): number => (key.plan === 'basic' ? 0 : WEBHOOK_LIMITS[key.plan].messagesPerDay);

/**
 * A test or retry past the key's daily limit: 429, as the spec answers every per-day limit, with
 * Retry-After until the next UTC day (when the count starts over), under a code of its own (as
 * too_many_streams): waiting a second, as after rate_limited, would not help.
 */
function dailyLimitReached(key: ApiKey, now = Date.now()): ApiError {
  const d = new Date(now);
  const wait = Math.max(1, Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - now) / 1000));
  return new ApiError(
    429,
    'webhook_daily_limit',
    `this key has had its plan's ${dailyLimit(key)} webhook deliveries of today (UTC); tests and retries can be made again in ${wait} s`,
    { 'retry-after': String(wait) },
  );
}

/** The url and filters of a create body, checked beyond their schema (SSRF rules, filter semantics). */
function checkedInput(body: CreateInput, allowPrivate: boolean): { url: string; filters: object } {
  const url = checkWebhookUrl(body.url, { allowPrivate });
  if (!url.ok) throw badParameter('url', url.reason);
  const filters = filtersSchema.safeParse(body.filters ?? {});
  if (!filters.success) {
    const issue = filters.error.issues[0];
    const path = ['filters', ...(issue?.path ?? []).map(String)].join('.');
    throw badParameter(path, issue?.message ?? 'invalid');
  }
  return { url: url.url.href, filters: filters.data };
}

async function create(w: Webhooks, req: FastifyRequest<{ Body: CreateInput }>, reply: FastifyReply) {
  const { store, box } = w.ready();
  const { url, filters } = checkedInput(req.body, w.settings?.allowPrivateUrls ?? false);
  const key = keyOf(req);
  const id = newSubscriptionId();
  const secret = generateSecret();
  const row = await store.create(key.id, subscriptionLimit(key), {
    id,
    url,
    description: req.body.description,
    filters,
    batch_max: req.body.batch?.max_events ?? 1,
    batch_window_ms: req.body.batch?.window_ms ?? 0,
    secret_sealed: box.seal(secret, id),
  });
  if (row === 'limit')
    throw new ApiError(
      403,
      'webhook_limit',
      `this key has its plan's ${subscriptionLimit(key)} webhook subscriptions; delete one first`,
    );
  return sendObject(reply.code(201), { data: { ...subscriptionJson(row), secret }, ...keyFieldsOf(req) }, NO_STORE);
}

async function rotate(w: Webhooks, req: FastifyRequest<{ Params: IdParams }>, reply: FastifyReply) {
  const { store, box } = w.ready();
  const secret = generateSecret();
  const row = await store.rotate(keyOf(req).id, req.params.id, box.seal(secret, req.params.id));
  if (!row?.previous_secret_until) throw notFound(req.params.id);
  const data = { secret, previous_valid_until: row.previous_secret_until.toISOString() };
  return sendObject(reply, { data, ...keyFieldsOf(req) }, NO_STORE);
}

async function deliveries(
  w: Webhooks,
  req: FastifyRequest<{ Params: IdParams; Querystring: DeliveriesQuery }>,
  reply: FastifyReply,
) {
  const limit = req.query.limit ?? 50;
  // One more than the page: whether there is a next one, without a count.
  const rows = await w.ready().store.deliveries(keyOf(req).id, req.params.id, { ...req.query, limit: limit + 1 });
  if (rows === undefined) throw notFound(req.params.id);
  if (rows === 'before') throw badParameter('before', 'not a message of this subscription');
  const page = rows.slice(0, limit);
  const more = rows.length > limit;
  return sendObject(
    reply,
    {
      data: page.map(deliveryJson),
      has_more: more,
      next_before: more ? (page[page.length - 1]?.id ?? null) : null,
      ...keyFieldsOf(req),
    },
    NO_STORE,
  );
}

/** Listing and enabling subscriptions. */
function registerSubscriptionRoutes(app: FastifyInstance, w: Webhooks): void {
  app.get('/v1/webhooks', { config: { endpoint: 'GET /v1/webhooks' }, schema: LIST }, async (req, reply) => {
    const { store } = w.ready();
    const key = keyOf(req);
    const rows = await store.list(key.id);
    const usage = { ...(await store.usage(key.id)), limit: dailyLimit(key) };
    return sendObject(reply, { data: rows.map((r) => subscriptionJson(r)), usage, ...keyFieldsOf(req) }, NO_STORE);
  });
  app.post<{ Params: IdParams }>(
    '/v1/webhooks/:id/rotate-secret',
    { config: { endpoint: 'POST /v1/webhooks/{id}/rotate-secret' }, schema: ROTATE },
    (req, reply) => rotate(w, req, reply),
  );
  app.post<{ Params: IdParams }>(
    '/v1/webhooks/:id/enable',
    { config: { endpoint: 'POST /v1/webhooks/{id}/enable' }, schema: ENABLE },
    async (req, reply) => {
      const row = await w.ready().store.enable(keyOf(req).id, req.params.id);
      if (!row) throw notFound(req.params.id);
      return sendObject(reply, { data: subscriptionJson(row), ...keyFieldsOf(req) }, NO_STORE);
    },
  );
}

/**
 * One subscription, and deleting it. Registered last, so its path comes last in the document:
 * checks that walk the document in order (test/support/openapi-contract.ts) delete a subscription
 * only after asking everything else of it.
 */
function registerOneRoutes(app: FastifyInstance, w: Webhooks): void {
  app.get<{ Params: IdParams }>(
    '/v1/webhooks/:id',
    { config: { endpoint: 'GET /v1/webhooks/{id}' }, schema: GET_ONE },
    async (req, reply) => {
      const row = await w.ready().store.get(keyOf(req).id, req.params.id);
      if (!row) throw notFound(req.params.id);
      return sendObject(reply, { data: subscriptionJson(row), ...keyFieldsOf(req) }, NO_STORE);
    },
  );
  app.delete<{ Params: IdParams }>(
    '/v1/webhooks/:id',
    { config: { endpoint: 'DELETE /v1/webhooks/{id}' }, schema: DELETE },
    async (req, reply) => {
      if (!(await w.ready().store.remove(keyOf(req).id, req.params.id))) throw notFound(req.params.id);
      return reply.code(204).header('cache-control', NO_STORE).header('vary', VARY).send();
    },
  );
}

/** Test deliveries and the delivery log. */
function registerDeliveryRoutes(app: FastifyInstance, w: Webhooks): void {
  app.post<{ Params: IdParams }>(
    '/v1/webhooks/:id/test',
    { config: { endpoint: 'POST /v1/webhooks/{id}/test' }, schema: TEST },
    async (req, reply) => {
      const key = keyOf(req);
      const message = { id: testMessageId(), body: testBody(req.params.id, new Date()) };
      const id = await w.ready().store.enqueueTest(key.id, req.params.id, message, dailyLimit(key));
      if (!id) throw notFound(req.params.id);
      if (id === 'limit') throw dailyLimitReached(key);
      return sendObject(reply.code(202), { data: { message_id: id }, ...keyFieldsOf(req) }, NO_STORE);
    },
  );
  app.get<{ Params: IdParams; Querystring: DeliveriesQuery }>(
    '/v1/webhooks/:id/deliveries',
    { config: { endpoint: 'GET /v1/webhooks/{id}/deliveries' }, schema: DELIVERIES },
    (req, reply) => deliveries(w, req, reply),
  );
  app.post<{ Params: IdParams & { message_id: string } }>(
    '/v1/webhooks/:id/deliveries/:message_id/retry',
    { config: { endpoint: 'POST /v1/webhooks/{id}/deliveries/{message_id}/retry' }, schema: RETRY },
    async (req, reply) => {
      const key = keyOf(req);
      const row = await w.ready().store.retry(key.id, req.params.id, req.params.message_id, dailyLimit(key));
      if (row === 'limit') throw dailyLimitReached(key);
      if (!row)
        throw new ApiError(
          404,
          'not_found',
          `no message '${req.params.message_id.slice(0, 64)}' of webhook subscription '${req.params.id.slice(0, 64)}' of this key`,
        );
      return sendObject(reply.code(202), { data: deliveryJson(row), ...keyFieldsOf(req) }, NO_STORE);
    },
  );
}

export function registerWebhookRoutes(app: FastifyInstance, settings: WebhookSettings | undefined): void {
  const w = new Webhooks(settings);
  app.addHook('onClose', w.close);
  app.post<{ Body: CreateInput }>(
    '/v1/webhooks',
    {
      config: { endpoint: 'POST /v1/webhooks' },
      schema: CREATE,
      // Before the schema's validation, which would drop unknown properties rather than refuse them.
      preValidation: async (req) => {
        const field = unknownField(req.body, CreateBody);
        if (field) throw badParameter(field, 'not a field of this body');
      },
    },
    (req, reply) => create(w, req, reply),
  );
  registerSubscriptionRoutes(app, w);
  registerDeliveryRoutes(app, w);
  registerOneRoutes(app, w);
}
