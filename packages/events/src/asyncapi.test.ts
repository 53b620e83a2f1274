/**
 * docs/asyncapi.yaml is the topic catalogue for downstream teams: it must name every topic of
 * infra/kafka/topics.json with its partitions and the Avro schema file its records are written with.
 */
import { existsSync, readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { eventSchema, topicDefinitions } from './schemas.js';

const docUrl = new URL('../../../docs/asyncapi.yaml', import.meta.url);

interface Doc {
  asyncapi: string;
  channels: Record<
    string,
    {
      address: string;
      bindings: { kafka: { partitions: number; topicConfiguration?: Record<string, unknown> } };
      messages: Record<string, { $ref: string }>;
    }
  >;
  components: { messages: Record<string, { payload: { schema: { $ref: string } } }> };
}

describe('docs/asyncapi.yaml', () => {
  const doc = load(readFileSync(docUrl, 'utf8')) as Doc;

  it('is AsyncAPI 3 and lists exactly the project topics, with their partitions', () => {
    expect(doc.asyncapi).toBe('3.0.0');
    const channels = Object.values(doc.channels);
    expect(channels.map((c) => c.address).sort()).toEqual(
      topicDefinitions()
        .map((t) => t.name)
        .sort(),
    );
    for (const t of topicDefinitions()) {
      const c = channels.find((x) => x.address === t.name);
      expect(c?.bindings.kafka.partitions, t.name).toBe(t.partitions);
      expect(Object.keys(c?.messages ?? {}), t.name).toEqual([t.event]);
    }
  });

  it('states every setting of each topic as topics.json creates it (non-binding ones as x-<name>)', () => {
    for (const t of topicDefinitions()) {
      const documented =
        doc.channels[Object.keys(doc.channels).find((k) => doc.channels[k]?.address === t.name) ?? '']?.bindings.kafka
          .topicConfiguration;
      const normalised = Object.fromEntries(
        Object.entries(documented ?? {}).map(([k, v]) => [
          k.replace(/^x-/, ''),
          Array.isArray(v) ? v.join(',') : String(v),
        ]),
      );
      expect(normalised, t.name).toEqual(t.config ?? {});
    }
  });

  it("references each event's own schema file, and the file exists", () => {
    for (const t of topicDefinitions()) {
      const ref = doc.components.messages[t.event]?.payload.schema.$ref as string;
      const file = new URL(ref, docUrl);
      expect(existsSync(file), ref).toBe(true);
      // The very schema the producers register for this event kind.
      expect(JSON.stringify(JSON.parse(readFileSync(file, 'utf8'))), ref).toBe(eventSchema(t.event).text);
    }
  });
});
