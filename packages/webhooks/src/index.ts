/**
 * Webhook deliveries to the Standard Webhooks spec: what the API validates and stores and what the
 * notifier matches, signs and schedules. Pure helpers (no I/O but DNS in guardedLookup) and the
 * webhooks schema's migrations.
 */
export { WEBHOOKS_MIGRATIONS_DIR } from './migrations.js';
export { generateSecret, signatureHeader, signPayload } from './signing.js';
export { eventId, messageId, newSubscriptionId, testMessageId, type ChangeKey } from './ids.js';
export { batchBody, changeBody, testBody, toWebhookChange, type WebhookChange } from './bodies.js';
export { filtersSchema, matches, type Filters } from './filters.js';
export { checkWebhookUrl, guardedLookup, isPublicAddress, type UrlPolicy } from './url-policy.js';
export { SecretBox } from './secret-box.js';
export { RETRY_HORIZON_MS, retryAfterMs, retryDelayMs } from './schedule.js';
export { WEBHOOK_LIMITS } from './limits.js';
export { WEBHOOK_DUE_CHANNEL, WEBHOOKS_CHANNEL } from './channels.js';
