/**
 * Subjects get one explicit compatibility rule: FULL_TRANSITIVE (serde.ts compatibilityOf). A
 * change both older and newer readers decode is accepted and old records still decode; a change
 * an older consumer could not read is refused, even when newer readers could. history.v1's
 * withdrawn version 2 stays registered where it was, and its writers use version 1 again.
 */
import { eventSchema, EventSerde, schemaVersions } from '@skinprices/events';
import avro from 'avsc';
import { afterAll, describe, expect, it } from 'vitest';
import { SAMPLES } from '../support/samples.js';
import { TestStack } from '../support/stack.js';

function listingSchemaWith(extraField: Record<string, unknown>): string {
  const schema = JSON.parse(eventSchema('listing').text) as { fields: unknown[] };
  schema.fields.push(extraField);
  return JSON.stringify(schema);
}

describe('schema evolution under FULL_TRANSITIVE compatibility', () => {
  const stack = new TestStack();
  afterAll(() => stack.cleanup());

  it('accepts a new field with a default, and records written before it still decode', async () => {
    const topic = await stack.topic('listing');
    const v1 = await stack.serde.codec(topic, 'listing');
    const oldRecord = v1.encode(SAMPLES.listing);

    const v2Text = listingSchemaWith({ name: 'liquidity_hint', type: ['null', 'string'], default: null });
    const v2Id = await stack.serde.register(topic, 'listing', v2Text);
    expect(v2Id).not.toBe(v1.schemaId);

    const res = await fetch(`${stack.env.registryUrl}/subjects/${topic}-value/versions`);
    expect(await res.json()).toEqual([1, 2]);
    const config = await fetch(`${stack.env.registryUrl}/config/${topic}-value`);
    expect(await config.json()).toMatchObject({ compatibilityLevel: 'FULL_TRANSITIVE' });

    // The v1 record decodes unchanged after the subject moved to v2.
    expect(JSON.parse(JSON.stringify(await v1.decode(oldRecord)))).toEqual(SAMPLES.listing);
  });

  it('refuses a new required field without a default (schema_incompatible, not retryable)', async () => {
    const topic = await stack.topic('listing');
    await stack.serde.codec(topic, 'listing');
    const bad = listingSchemaWith({ name: 'float_required', type: 'string' });
    await expect(stack.serde.register(topic, 'listing', bad)).rejects.toMatchObject({
      code: 'schema_incompatible',
      retryable: false,
    });
    const res = await fetch(`${stack.env.registryUrl}/subjects/${topic}-value/versions`);
    expect(await res.json()).toEqual([1]);
  });

  it('refuses a field removed that consumers on the earlier version need, which BACKWARD accepted', async () => {
    const topic = await stack.topic('listing');
    await stack.serde.codec(topic, 'listing');
    const schema = JSON.parse(eventSchema('listing').text) as { fields: { name: string }[] };
    const without = JSON.stringify({ ...schema, fields: schema.fields.filter((f) => f.name !== 'count') });
    await expect(stack.serde.register(topic, 'listing', without)).rejects.toMatchObject({
      code: 'schema_incompatible',
      retryable: false,
    });
    // The same change under the old rule: new readers of old records were all it protected.
    const lax = new EventSerde({ registryUrl: stack.env.registryUrl, compatibility: 'BACKWARD' });
    const other = await stack.topic('listing');
    await lax.codec(other, 'listing');
    expect(await lax.register(other, 'listing', without)).toBeGreaterThan(0);
  });

  it("writes history.v1 with version 1 again where version 2 was registered, and reads version 2's records", async () => {
    const topic = await stack.topic('historyPoint');
    const subject = `${topic}-value`;
    // A subject as an earlier release left it: versions 1 and 2, BACKWARD_TRANSITIVE.
    const old = new EventSerde({ registryUrl: stack.env.registryUrl, compatibility: 'BACKWARD_TRANSITIVE' });
    const [v1, v2] = schemaVersions('historyPoint');
    const v1Id = await old.register(topic, 'historyPoint', JSON.stringify(JSON.parse(v1!.text)));
    const v2Id = await old.register(topic, 'historyPoint', JSON.stringify(JSON.parse(v2!.text)));
    expect(v2Id).not.toBe(v1Id);
    const codec = await stack.serde.codec(topic, 'historyPoint');
    expect(codec.schemaId).toBe(v1Id);
    const versions = await fetch(`${stack.env.registryUrl}/subjects/${subject}/versions`);
    expect(await versions.json()).toEqual([1, 2]);
    const config = await fetch(`${stack.env.registryUrl}/config/${subject}`);
    expect(await config.json()).toMatchObject({ compatibilityLevel: 'FULL_TRANSITIVE' });
    // A point version 2 wrote for its hours only (no close) still decodes, with its hours.
    const v2Type = avro.Type.forSchema(JSON.parse(v2!.text) as avro.Schema);
    const header = Buffer.from([0, 0, 0, 0, 0]);
    header.writeUInt32BE(v2Id, 1);
    const hoursOnly = { ...SAMPLES.historyPoint, price: null, hours: SAMPLES.historyHours.hours };
    const decoded = await codec.decode(Buffer.concat([header, v2Type.toBuffer(hoursOnly)]));
    expect(JSON.parse(JSON.stringify(decoded))).toEqual(JSON.parse(JSON.stringify(hoursOnly)));
    // And a point written now is version 1's shape: no hours, a close.
    expect(() => codec.encode({ ...SAMPLES.historyPoint, price: null })).toThrow(/price/);
  });

  it('decodes a record written with a newer schema into the shape this code knows', async () => {
    const topic = await stack.topic('listing');
    const ours = await stack.serde.codec(topic, 'listing');
    const newerText = listingSchemaWith({ name: 'liquidity_hint', type: ['null', 'string'], default: null });
    const newerId = await stack.serde.register(topic, 'listing', newerText);
    const newer = avro.Type.forSchema(JSON.parse(newerText) as avro.Schema);
    const header = Buffer.from([0, 0, 0, 0, 0]);
    header.writeUInt32BE(newerId, 1);
    const record = Buffer.concat([header, newer.toBuffer({ ...SAMPLES.listing, liquidity_hint: '0.93' })]);
    expect(JSON.parse(JSON.stringify(await ours.decode(record)))).toEqual(SAMPLES.listing);
  });

  // Root cause: Apicurio answers GET /config/{subject} of an existing subject without a rule
  // with 200 NONE (Confluent: 404), and the client then refuses to register.
  it('registers into a subject created elsewhere without a rule (Apicurio NONE regression)', async () => {
    const topic = await stack.topic('listing');
    const subject = `${topic}-value`;
    const created = await fetch(`${stack.env.registryUrl}/subjects/${subject}/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema: eventSchema('listing').text }),
    });
    expect(created.status).toBe(200);
    const before = await fetch(`${stack.env.registryUrl}/config/${subject}`);
    expect(await before.json()).toMatchObject({ compatibilityLevel: 'NONE' });

    const codec = await stack.serde.codec(topic, 'listing');
    expect(codec.schemaId).toBeGreaterThan(0);
    const after = await fetch(`${stack.env.registryUrl}/config/${subject}`);
    expect(await after.json()).toMatchObject({ compatibilityLevel: 'FULL_TRANSITIVE' });
  });
});
