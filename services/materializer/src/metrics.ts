/** Prometheus metrics of one materializer process (a registry per instance: tests run several in one process). */
import { serveMetrics, type MetricsServer } from '@skinprices/runtime';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class MaterializerMetrics {
  readonly registry = new Registry();
  readonly lag = new Gauge({
    name: 'materializer_consumer_lag',
    help: 'Records behind per assigned partition: end offset minus the next offset stored in PostgreSQL',
    labelNames: ['topic', 'partition'],
    registers: [this.registry],
  });
  readonly batchSeconds = new Histogram({
    name: 'materializer_batch_apply_duration_seconds',
    help: 'Time from receiving a batch to its commit (the ingest path: rows, outbox and offsets in one transaction)',
    labelNames: ['topic'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly batchWait = new Histogram({
    name: 'materializer_batch_wait_seconds',
    help: "Time from a batch's first record's produce (its CreateTime) to the batch reaching the ingest path: Kafka, the fetch and the wait for a free slot, before the apply",
    labelNames: ['topic'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    registers: [this.registry],
  });
  readonly records = new Counter({
    name: 'materializer_records_applied_total',
    help: 'Records applied to the read model (redelivered ones below the stored offset not counted)',
    labelNames: ['topic'],
    registers: [this.registry],
  });
  readonly deadLetters = new Counter({
    name: 'materializer_dead_letters_total',
    help: 'Records written to dead_letters: reason decode (undecodable) or sql (decoded, refused by PostgreSQL)',
    labelNames: ['topic', 'reason'],
    registers: [this.registry],
  });
  readonly batchesFailed = new Counter({
    name: 'materializer_batches_failed_total',
    help: 'Batches rolled back by a retryable error (connection, deadlock …); Kafka redelivers them',
    labelNames: ['topic'],
    registers: [this.registry],
  });
  readonly repeats = new Counter({
    name: 'materializer_listing_repeats_total',
    help: 'Listing records equal to the row they would write, dropped before SQL: path skipped (nothing written) or candles (only their hourly and daily candles)',
    labelNames: ['path'],
    registers: [this.registry],
  });
  readonly servedRows = new Gauge({
    name: 'materializer_served_rows',
    help: 'Listings rows held in memory to recognise repeats (the partitions of listings.v1 this process owns)',
    registers: [this.registry],
  });
  readonly batchesIsolated = new Counter({
    name: 'materializer_batches_isolated_total',
    help: 'Batches taken apart because a record in them was refused (poison isolation)',
    labelNames: ['topic'],
    registers: [this.registry],
  });
  readonly deriveSeconds = new Histogram({
    name: 'materializer_derive_duration_seconds',
    help: "Derive transactions, apart from ingest, by step: markers (vanished items, statistics, the clock), judge (the outlier guard's second look) and recompute (liquidity, market cap)",
    labelNames: ['step'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly liquidityItems = new Counter({
    name: 'materializer_liquidity_items_total',
    help: 'Items whose liquidity a refresh computed, by scope: all (the first refresh of a schema, or after a snapshot too old to compare ages with) or dirty (the items whose inputs moved since the last)',
    labelNames: ['scope'],
    registers: [this.registry],
  });
  readonly listingsFirst = new Gauge({
    name: 'materializer_listings_first',
    help: 'Whether the other data topics are paused because the listings are behind (1) or flowing (0): priority.ts',
    registers: [this.registry],
  });
  readonly listingsFirstPausedSeconds = new Gauge({
    name: 'materializer_listings_first_paused_seconds',
    help: 'Seconds the other data topics have spent paused behind the listings since the process started (ended pauses)',
    registers: [this.registry],
  });
  readonly markers = new Counter({
    name: 'materializer_markers_applied_total',
    help: 'Poll-cycle markers applied',
    registers: [this.registry],
  });
  readonly outboxPublished = new Counter({
    name: 'materializer_outbox_published_total',
    help: 'Committed changes published to price-changes.v1 and prices.current.v1',
    registers: [this.registry],
  });
  readonly outboxOldestAge = new Gauge({
    name: 'materializer_outbox_oldest_age_seconds',
    help: 'Age of the oldest change still waiting in the outbox (0 when empty)',
    registers: [this.registry],
  });
  readonly lastBatch = new Gauge({
    name: 'materializer_last_batch_timestamp_seconds',
    help: 'When the last batch committed (Unix time)',
    registers: [this.registry],
  });
  readonly heartbeat = new Gauge({
    name: 'materializer_heartbeat_timestamp_seconds',
    help: 'When the last heartbeat row was written (Unix time)',
    registers: [this.registry],
  });
  readonly heartbeatFailures = new Counter({
    name: 'materializer_heartbeat_failures_total',
    help: 'Heartbeats that could not measure lag or write their row',
    registers: [this.registry],
  });

  /** Serves /metrics; port 0 picks a free port. */
  serve(host: string, port: number): Promise<MetricsServer> {
    return serveMetrics(this.registry, host, port);
  }
}
