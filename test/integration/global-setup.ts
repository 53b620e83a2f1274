/**
 * Integration tests need the real stack. This checks it once, up front, and fails with what
 * to do instead of letting every test time out. `make test` starts the stack before vitest.
 */
import { createKafka, waitForKafka } from '@skinprices/events';
import pg from 'pg';
import { stackEnv } from '../support/stack.js';

export default async function setup(): Promise<void> {
  const env = stackEnv();
  const problems: string[] = [];
  try {
    await waitForKafka(createKafka({ brokers: env.brokers, clientId: 'it-setup' }), 10_000);
  } catch (err) {
    problems.push(`Kafka at ${env.brokers}: ${String(err)}`);
  }
  try {
    const res = await fetch(`${env.registryUrl}/subjects`, { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) problems.push(`schema registry at ${env.registryUrl}: HTTP ${res.status}`);
  } catch (err) {
    problems.push(`schema registry at ${env.registryUrl}: ${String(err)}`);
  }
  const client = new pg.Client({ connectionString: env.databaseUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    problems.push(`PostgreSQL at ${env.databaseUrl}: ${String(err)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  if (problems.length > 0) {
    throw new Error(`the integration stack is not running; start it with 'make up':\n  ${problems.join('\n  ')}`);
  }
}
