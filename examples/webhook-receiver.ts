/**
 * An example for customers: receive our price-change webhooks and check each one's signature with
 * the `standardwebhooks` package (the Standard Webhooks reference library; no code of this
 * repository), using nothing but node:http.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/webhook-receiver.ts [--port 9000] [--path /hook]
 *
 * Then subscribe (pro or enterprise key; the secret is shown once, in the answer):
 *
 *   curl -s -H 'x-api-key: <key>' -H 'content-type: application/json' \
 *        -d '{"url":"https://your.host/hook","filters":{"min_change_pct":"5"}}' https://<api>/v1/webhooks
 *
 * What a receiver must do, and this one does:
 * - verify before trusting anything: the signature covers the webhook-id, the timestamp and the raw
 *   body bytes (so read the body raw, before any JSON parsing), and `verify` refuses timestamps
 *   more than 5 minutes away (replays);
 * - answer 2xx quickly, and do slow work after answering: a receiver that takes longer than the
 *   sender's timeout (10 s) gets the same message again;
 * - de-duplicate by the `webhook-id` header: delivery is at least once, and a retried or
 *   re-sent message keeps its id (one id is one change, or one batch of changes).
 * During a secret rotation both the old and the new secret sign each message for 24 hours; a
 * receiver holding either verifies.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { parseArgs } from 'node:util';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/** The change fields of a `price.changed` message (and of each entry of a batch). */
export interface WebhookChange {
  market: string;
  market_hash_name: string;
  phase: string;
  currency: string;
  /** Decimal strings; null = no listing. */
  old_price: string | null;
  new_price: string | null;
  old_count: number | null;
  new_count: number | null;
  /** ISO-8601, UTC. */
  observed_at: string;
  changed_at: string;
}

/** A verified message, as received. */
export interface ReceivedWebhook {
  id: string;
  type: 'price.changed' | 'price.changed.batch' | 'webhook.test';
  timestamp: string;
  /** The changes it carries: one for price.changed, many for a batch, none for a test. */
  changes: WebhookChange[];
  /** Seen before (same webhook-id): a retry or a re-send; act on it once. */
  duplicate: boolean;
}

export interface ReceiverOptions {
  /** The subscription's secret, 'whsec_…'. */
  secret: string;
  port: number;
  host?: string;
  /** @default '/hook' */
  path?: string;
  /** Bodies above this are refused (413) unread. @default 1 MiB */
  maxBodyBytes?: number;
}

type Body = { type: ReceivedWebhook['type']; timestamp: string; data: WebhookChange | { changes: WebhookChange[] } };

/** Reads the raw body, at most `limit` bytes; undefined when it is larger. */
async function rawBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function changesOf(body: Body): WebhookChange[] {
  if (body.type === 'price.changed') return [body.data as WebhookChange];
  if (body.type === 'price.changed.batch') return (body.data as { changes: WebhookChange[] }).changes;
  return [];
}

/**
 * Starts a receiver; `onWebhook` is called once per verified message (duplicates flagged). The
 * answer is 204 for a verified message, 401 for a bad signature, 413 and 400 for bad bodies.
 */
export async function startWebhookReceiver(
  options: ReceiverOptions,
  onWebhook: (message: ReceivedWebhook) => void | Promise<void>,
): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const verifier = new Webhook(options.secret);
  const path = options.path ?? '/hook';
  const seen = new Set<string>();
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== path) return res.writeHead(404).end();
      const body = await rawBody(req, options.maxBodyBytes ?? 1024 * 1024);
      if (body === undefined) return res.writeHead(413).end();
      let verified: Body;
      try {
        // Every header the library needs: webhook-id, webhook-timestamp, webhook-signature.
        verified = verifier.verify(body, req.headers as Record<string, string>) as Body;
      } catch (err) {
        if (err instanceof WebhookVerificationError) return res.writeHead(401).end();
        return res.writeHead(400).end();
      }
      const id = req.headers['webhook-id'] as string;
      const duplicate = seen.has(id);
      seen.add(id);
      // Answer first: the sender only needs to know the message arrived.
      res.writeHead(204).end();
      await onWebhook({
        id,
        type: verified.type,
        timestamp: verified.timestamp,
        changes: changesOf(verified),
        duplicate,
      });
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port, options.host ?? '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    server,
    url: `http://${options.host ?? '127.0.0.1'}:${address.port}${path}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '9000' }, path: { type: 'string' } } });
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    process.stderr.write('set WEBHOOK_SECRET to the subscription secret (whsec_…) the API returned\n');
    process.exit(2);
  }
  const receiver = await startWebhookReceiver(
    { secret, port: Number(values.port), ...(values.path ? { path: values.path } : {}) },
    (m) => {
      if (m.duplicate) return;
      for (const c of m.changes)
        process.stdout.write(
          `${JSON.stringify({ id: m.id, market: c.market, name: c.market_hash_name, phase: c.phase, old: c.old_price, new: c.new_price })}\n`,
        );
      if (m.type === 'webhook.test') process.stdout.write(`${JSON.stringify({ id: m.id, type: m.type })}\n`);
    },
  );
  process.stderr.write(`receiving signed webhooks at ${receiver.url}\n`);
}
