/** Prometheus metrics of one notifier process (a registry per instance: tests run several in one process). */
import { serveMetrics, type MetricsServer } from '@skinprices/runtime';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class NotifierMetrics {
  readonly registry = new Registry();
  readonly messages = new Counter({
    name: 'notifier_messages_total',
    help: 'Messages by outcome: created (to be sent), succeeded, failed (retries exhausted or a final answer); dropped: matched changes not stored, their key’s daily limit reached (each change of a batch counted)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly deliveries = new Counter({
    name: 'notifier_deliveries_total',
    help: 'Delivery attempts by outcome: ok (2xx), retry (5xx, 429, timeout, connection), fail (3xx, 4xx, refused address), ignored (the message was deleted or its lease lost meanwhile)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'notifier_delivery_latency_seconds',
    help: 'From the change’s commit to the read model (committed_at) to its 2xx delivery',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly attemptSeconds = new Histogram({
    name: 'notifier_attempt_duration_seconds',
    help: 'One HTTP exchange with a receiver, connection to response',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly inFlight = new Gauge({
    name: 'notifier_in_flight',
    help: 'Deliveries this process is making now',
    registers: [this.registry],
  });
  readonly consumedChanges = new Counter({
    name: 'notifier_consumed_changes_total',
    help: 'Price changes matched against the subscriptions (records read again below the stored offset not counted)',
    registers: [this.registry],
  });
  readonly undecodable = new Counter({
    name: 'notifier_undecodable_changes_total',
    help: 'Records of price-changes.v1 that could not be decoded and were skipped',
    registers: [this.registry],
  });
  readonly subscriptions = new Gauge({
    name: 'notifier_subscriptions',
    help: 'Subscriptions served (active, with a key that may have webhooks)',
    registers: [this.registry],
  });
  readonly state = new Gauge({
    name: 'notifier_state',
    help: 'The notifier’s state: 1 for the current one (created, starting, running, stopping, stopped, failed)',
    labelNames: ['state'],
    registers: [this.registry],
  });

  /** Serves /metrics; port 0 picks a free port. */
  serve(host: string, port: number): Promise<MetricsServer> {
    return serveMetrics(this.registry, host, port);
  }
}
