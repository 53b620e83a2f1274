/** Prometheus metrics of one poller process (a registry per instance: tests run several in one process). */
import { serveMetrics, type MetricsServer } from '@skinprices/runtime';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class PollerMetrics {
  readonly registry = new Registry();
  readonly cycles = new Counter({
    name: 'poller_cycles_total',
    help: 'Poll cycles by outcome',
    labelNames: ['market', 'kind', 'mode', 'outcome'],
    registers: [this.registry],
  });
  readonly cycleSeconds = new Histogram({
    name: 'poller_cycle_duration_seconds',
    help: 'Duration of a poll cycle',
    labelNames: ['market', 'kind'],
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly requests = new Counter({
    name: 'poller_upstream_requests_total',
    help: 'Upstream HTTP requests by status (error: no status)',
    labelNames: ['market', 'status'],
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'poller_upstream_request_duration_seconds',
    help: 'Upstream request latency',
    labelNames: ['market'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly events = new Counter({
    name: 'poller_events_produced_total',
    help: 'Events produced to Kafka',
    labelNames: ['market', 'kind'],
    registers: [this.registry],
  });
  readonly rejected = new Counter({
    name: 'poller_rows_rejected_total',
    help: 'Upstream rows refused (zero price, unknown phase …)',
    labelNames: ['market', 'kind'],
    registers: [this.registry],
  });
  readonly duplicates = new Counter({
    name: 'poller_rows_duplicate_total',
    help: 'Upstream rows seen twice within one cycle',
    labelNames: ['market', 'kind'],
    registers: [this.registry],
  });
  readonly circuitOpen = new Gauge({
    name: 'poller_circuit_open',
    help: '1 while the circuit breaker keeps the marketplace off',
    labelNames: ['market'],
    registers: [this.registry],
  });
  readonly lastComplete = new Gauge({
    name: 'poller_last_complete_cycle_timestamp_seconds',
    help: 'When the last COMPLETE cycle finished (freshness)',
    labelNames: ['market', 'kind'],
    registers: [this.registry],
  });

  /** Serves /metrics; port 0 picks a free port. */
  serve(host: string, port: number): Promise<MetricsServer> {
    return serveMetrics(this.registry, host, port);
  }
}
