/**
 * The NOTIFY channels from the API to the notifiers. Each payload is the webhooks schema's name
 * (WEBHOOKS_SCHEMA), so notifiers of other schemas on the same database ignore it. Sent inside the
 * writing transaction: a listener hears it only once the write is committed.
 */

/** Subscriptions changed (created, deleted, rotated, enabled): reload them. */
export const WEBHOOKS_CHANNEL = 'skinprices_webhooks';

/**
 * Messages were made due (a test delivery, a retry, an enable's queued deliveries): wake the
 * dispatcher, nothing to reload. Apart from WEBHOOKS_CHANNEL so that a customer's tests and retries
 * do not make every notifier reload every subscription.
 */
export const WEBHOOK_DUE_CHANNEL = 'skinprices_webhook_due';
