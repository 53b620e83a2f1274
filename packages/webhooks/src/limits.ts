/**
 * What each plan may do with webhooks. Basic has no entry: its keys get 403 from the routes and
 * nothing from the notifier. The daily limit bounds what one key can make us send (and store).
 */
export const WEBHOOK_LIMITS = {
  pro: { subscriptions: 10, messagesPerDay: 100_000 },
  enterprise: { subscriptions: 100, messagesPerDay: 2_000_000 },
} as const satisfies Record<string, { subscriptions: number; messagesPerDay: number }>;
