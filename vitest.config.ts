import { defineConfig } from 'vitest/config';

/**
 * Two projects:
 * - unit: beside the code, needs no services, runs anywhere;
 * - integration: test/ against the real Kafka, schema registry and PostgreSQL (`make up`).
 *   Each test makes its own topics, consumer group and database schema and removes them.
 */
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'infra/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/integration/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // One broker and one registry on two cores: files run one at a time, so timings
          // and consumer-group rebalances do not fight each other.
          fileParallelism: false,
        },
      },
    ],
  },
});
