/**
 * Fixtures for integration tests against the real stack. Every test gets its own topics,
 * consumer group and database schema, and gives them back: nothing a test makes outlives it,
 * so tests can run in any order and against a long-lived `make up` stack.
 */
import { randomBytes } from 'node:crypto';
import {
  createKafka,
  deleteTopics,
  ensureTopics,
  EventSerde,
  type EventKind,
  type TopicDefinition,
} from '@skinprices/events';
import { createPool, ident, type Pool } from '@skinprices/store';
import type { Kafka } from 'kafkajs';

export interface StackEnv {
  brokers: string;
  registryUrl: string;
  databaseUrl: string;
}

export function stackEnv(): StackEnv {
  return {
    brokers: process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
    registryUrl: process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7',
    databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices',
  };
}

/** A name no other test run uses: lower case, digits and underscores (valid as SQL and topic). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

type Cleanup = () => Promise<void>;

export class TestStack {
  readonly env = stackEnv();
  readonly kafka: Kafka = createKafka({ brokers: this.env.brokers, clientId: uniqueName('it') });
  readonly serde = new EventSerde({ registryUrl: this.env.registryUrl });
  private readonly cleanups: Cleanup[] = [];

  /** Creates a test-owned topic for events of `kind`; it and its subject are deleted at cleanup. */
  async topic(kind: EventKind, partitions = 3, config: Record<string, string> = {}): Promise<string> {
    const name = uniqueName(`t_${kind}`);
    const def: TopicDefinition = { name, event: kind, partitions, config };
    await ensureTopics(this.kafka, [def]);
    this.cleanups.push(async () => {
      await deleteTopics(this.kafka, [name]);
      await this.serde.deleteSubject(`${name}-value`);
    });
    return name;
  }

  /** Creates a test-owned topic with a given name (deleted at cleanup, with its subject). */
  async topicNamed(
    name: string,
    kind: EventKind,
    partitions = 3,
    config: Record<string, string> = {},
  ): Promise<string> {
    await ensureTopics(this.kafka, [{ name, event: kind, partitions, config }]);
    this.cleanups.push(async () => {
      await deleteTopics(this.kafka, [name]);
      await this.serde.deleteSubject(`${name}-value`);
    });
    return name;
  }

  groupId(): string {
    return uniqueName('g');
  }

  /** A fresh schema in the project database and a pool whose search_path points at it. */
  async schema(): Promise<{ name: string; pool: Pool }> {
    const name = uniqueName('t');
    const admin = createPool({ databaseUrl: this.env.databaseUrl, max: 1 });
    await admin.query(`CREATE SCHEMA ${ident(name)}`);
    // A materializer on it holds the schema lock and applies three partitions at once beside its
    // derive path, and the test reads alongside.
    const pool = createPool({ databaseUrl: this.env.databaseUrl, schema: name, max: 8 });
    this.cleanups.push(async () => {
      await pool.end();
      await admin.query(`DROP SCHEMA ${ident(name)} CASCADE`);
      await admin.end();
    });
    return { name, pool };
  }

  /** Registers extra clean-up (consumers, producers) to run before topics and schemas go. */
  defer(cleanup: Cleanup): void {
    this.cleanups.push(cleanup);
  }

  async cleanup(): Promise<void> {
    const errors: unknown[] = [];
    for (const c of this.cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, 'test clean-up failed');
  }
}
