/**
 * Avro serde through the schema registry (Apicurio's Confluent-compatible API, or Confluent's).
 *
 * Registration goes through @kafkajs/confluent-schema-registry; the wire format (magic byte 0,
 * 4-byte schema id, Avro body) is written and read here directly so the hot path does no
 * per-message schema parsing: decoding resolves the writer's schema into ours once per schema
 * id, which is also what makes old records readable after a backward-compatible change.
 */
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { AppError } from '@skinprices/domain';
import type avro from 'avsc';
import { request } from 'undici';
import { eventSchema } from './schemas.js';
import type { EventKind, EventMap } from './types.js';
import { validateEvent } from './validate.js';

export type Compatibility =
  'BACKWARD' | 'BACKWARD_TRANSITIVE' | 'FORWARD' | 'FORWARD_TRANSITIVE' | 'FULL' | 'FULL_TRANSITIVE' | 'NONE';

/**
 * The rule every subject gets: FULL_TRANSITIVE. A new version must be readable by consumers on
 * every earlier version, and read every earlier version's records, so neither a subscriber that
 * has not upgraded nor a replay of old records ever breaks. BACKWARD alone only protects new
 * readers of old data: a version that makes a field nullable passes it, and a consumer still on
 * the version before fails on every record with the null
 * (docs/decisions/0004-state-topics-and-history-hours.md). history.v1's version 2 is such a
 * version and is withdrawn (schemas.ts WITHDRAWN): its subject's writers use version 1 again,
 * which the registry returns as the registered version it is, without a check against version 2.
 */
export function compatibilityOf(_kind: EventKind): Compatibility {
  return 'FULL_TRANSITIVE';
}

export interface SerdeOptions {
  /** Confluent-compatible base URL, e.g. http://127.0.0.1:8081/apis/ccompat/v7 */
  registryUrl: string;
  /**
   * One compatibility rule for every subject instead of each kind's (compatibilityOf). Each
   * subject gets its rule explicitly, because the client refuses to register when a subject's
   * rule differs from the one it is given. @default each kind's
   */
  compatibility?: Compatibility;
}

const MAGIC = 0;

export class EventSerde {
  readonly registry: SchemaRegistry;
  private readonly url: string;
  private readonly compatibility: Compatibility | undefined;
  private readonly codecs = new Map<string, Promise<TopicCodec<EventKind>>>();
  /** writer schema id → resolver into our schema of that kind (null: same schema). */
  private readonly resolvers = new Map<string, Promise<avro.Resolver | null>>();

  constructor(options: SerdeOptions) {
    this.url = options.registryUrl.replace(/\/+$/, '');
    this.compatibility = options.compatibility;
    this.registry = new SchemaRegistry({ host: this.url, retry: { retries: 3 } });
  }

  /**
   * The codec of a topic, registering our schema for `<topic>-value` on first use. Each topic is
   * bound to one event kind; tests bind their own throw-away topics to the same kinds.
   */
  codec<K extends EventKind>(topic: string, kind: K): Promise<TopicCodec<K>> {
    let c = this.codecs.get(topic);
    if (!c) {
      c = this.register(topic, kind, eventSchema(kind).text).then((id) => new TopicCodec(this, topic, kind, id));
      c.catch(() => this.codecs.delete(topic)); // a failed registration may be retried
      this.codecs.set(topic, c);
    }
    return c as Promise<TopicCodec<K>>;
  }

  /** Registers a schema text under `<topic>-value`; returns its id. Exposed for evolution tests. */
  async register(topic: string, kind: EventKind, schemaText: string): Promise<number> {
    const subject = `${topic}-value`;
    const rule = this.compatibility ?? compatibilityOf(kind);
    await this.ensureCompatibility(subject, rule);
    try {
      const { id } = await this.registry.register(
        { type: SchemaType.AVRO, schema: schemaText },
        { subject, compatibility: COMPATIBILITY[rule] },
      );
      return id;
    } catch (err) {
      throw translateRegistryError(err, subject, kind);
    }
  }

  /**
   * Apicurio answers `GET /config/{subject}` of an existing subject without a rule with 200 NONE
   * (Confluent: 404), and the client then throws "Compatibility does not match". So we read the
   * rule first and set ours where the subject exists with another one. A new subject (404) is
   * left to the client, which sets the rule right after the first registration.
   */
  private async ensureCompatibility(subject: string, rule: Compatibility): Promise<void> {
    const path = `${this.url}/config/${encodeURIComponent(subject)}`;
    const current = await this.http('GET', path);
    if (current.status === 404) return;
    const level = (current.body as { compatibilityLevel?: string }).compatibilityLevel;
    if (current.status === 200 && level?.toUpperCase() === rule) return;
    const put = await this.http('PUT', path, { compatibility: rule });
    // 409: another process set the rule between our read and our write (several services
    // registering one new subject at once). Fine if it is ours.
    if (put.status === 409) {
      const again = await this.http('GET', path);
      const now = (again.body as { compatibilityLevel?: string }).compatibilityLevel;
      if (again.status === 200 && now?.toUpperCase() === rule) return;
    }
    if (put.status !== 200) {
      throw new AppError('registry_unavailable', `could not set ${rule} on ${subject}: HTTP ${put.status}`);
    }
  }

  private async http(
    method: 'GET' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
  ): Promise<{ status: number; body: unknown }> {
    try {
      const res = await request(url, {
        method,
        headers: { 'content-type': 'application/vnd.schemaregistry.v1+json', accept: 'application/json' },
        body: body === undefined ? null : JSON.stringify(body),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await res.body.text();
      return { status: res.statusCode, body: text ? (JSON.parse(text) as unknown) : null };
    } catch (err) {
      throw new AppError('registry_unavailable', `schema registry at ${this.url} did not answer: ${String(err)}`, {
        cause: err,
      });
    }
  }

  /** Deletes a subject for good (test clean-up; needs deletion enabled on Apicurio). */
  async deleteSubject(subject: string): Promise<void> {
    const base = `${this.url}/subjects/${encodeURIComponent(subject)}`;
    await this.http('DELETE', base);
    await this.http('DELETE', `${base}?permanent=true`);
    for (const [topic] of this.codecs) if (`${topic}-value` === subject) this.codecs.delete(topic);
  }

  /** @internal resolver from the writer schema `id` into our schema of `kind`. */
  resolverFor(kind: EventKind, reader: avro.Type, id: number): Promise<avro.Resolver | null> {
    const key = `${kind}:${id}`;
    let r = this.resolvers.get(key);
    if (!r) {
      r = this.registry.getSchema(id).then((writer) => {
        const w = writer as unknown as avro.Type;
        return reader.equals(w) ? null : reader.createResolver(w);
      });
      r.catch(() => this.resolvers.delete(key));
      this.resolvers.set(key, r);
    }
    return r;
  }
}

function translateRegistryError(err: unknown, subject: string, kind: string): AppError {
  const status = (err as { status?: number } | null)?.status;
  const message = err instanceof Error ? err.message : String(err);
  if (status === 409 || /incompatib/i.test(message)) {
    return new AppError('schema_incompatible', `schema for ${kind} is incompatible with ${subject}: ${message}`, {
      cause: err,
    });
  }
  if (status !== undefined && status >= 400 && status < 500) {
    return new AppError('schema_incompatible', `registry refused ${subject} (HTTP ${status}): ${message}`, {
      cause: err,
      retryable: false,
    });
  }
  return new AppError('registry_unavailable', `registering ${subject} failed: ${message}`, { cause: err });
}

/** Encoder/decoder of one topic's values. */
export class TopicCodec<K extends EventKind> {
  private readonly type: avro.Type;
  private readonly reader: avro.Type;
  private readonly header: Buffer;
  /** Header, then the record being encoded; grows to the largest record seen. */
  private scratch: Buffer;

  constructor(
    private readonly serde: EventSerde,
    readonly topic: string,
    readonly kind: K,
    readonly schemaId: number,
  ) {
    this.type = eventSchema(kind).type;
    this.reader = eventSchema(kind).reader;
    this.header = Buffer.alloc(5);
    this.header.writeUInt8(MAGIC, 0);
    this.header.writeUInt32BE(schemaId, 1);
    this.scratch = Buffer.allocUnsafe(16 * 1024);
    this.header.copy(this.scratch, 0);
  }

  /**
   * Validates (shape and money rules), then encodes in the Confluent wire format. The record is
   * written after the header in a scratch buffer and copied out once (avsc's toBuffer plus a
   * concat allocated and copied three times per record, a tenth of the produce path).
   */
  encode(value: EventMap[K]): Buffer {
    validateEvent(this.kind, this.type, value);
    let end = this.type.encode(value, this.scratch, 5);
    if (end < 0) {
      // Too small by -end bytes: grow (at least double) and write again.
      this.scratch = Buffer.allocUnsafe(Math.max(this.scratch.length * 2, this.scratch.length - end));
      this.header.copy(this.scratch, 0);
      end = this.type.encode(value, this.scratch, 5);
    }
    const out = Buffer.allocUnsafe(end);
    this.scratch.copy(out, 0, 0, end);
    return out;
  }

  /** Decodes a record written with any registered version of this topic's schema into ours. */
  async decode(buffer: Buffer): Promise<EventMap[K]> {
    if (buffer.length < 5 || buffer.readUInt8(0) !== MAGIC) {
      throw new AppError('serde_invalid_event', `${this.topic}: not a schema-registry framed Avro record`);
    }
    const id = buffer.readUInt32BE(1);
    let resolver: avro.Resolver | null;
    try {
      resolver = await this.serde.resolverFor(this.kind, this.reader, id);
    } catch (err) {
      throw new AppError('registry_unavailable', `${this.topic}: writer schema ${id} could not be fetched`, {
        cause: err,
      });
    }
    try {
      const body = buffer.subarray(5);
      return (resolver ? this.reader.fromBuffer(body, resolver) : this.reader.fromBuffer(body)) as EventMap[K];
    } catch (err) {
      throw new AppError(
        'serde_invalid_event',
        `${this.topic}: record with schema ${id} does not decode: ${String(err)}`,
        {
          cause: err,
        },
      );
    }
  }
}
