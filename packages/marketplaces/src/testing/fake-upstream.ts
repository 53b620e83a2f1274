/**
 * Test support for adapter unit tests (not exported from the package): collect an adapter's
 * pages, and expect a promise to fail with an AppError.
 */
import { AppError } from '@skinprices/domain';
import { expect } from 'vitest';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
import type { UpstreamClient } from '../client.js';
import type { Kind, Page } from '../rows.js';

export type Query = Record<string, string | number | undefined>;

export async function fetchAll<K extends Kind>(
  adapter: Adapter,
  kind: K,
  ctx: FetchContext,
  input: KindInput = {},
  pages: Page<K>[] = [],
): Promise<Page<K>[]> {
  for await (const page of adapter.pages(kind, ctx, input)) pages.push(page);
  return pages;
}

export async function failure(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

export interface Call {
  path: string;
  query: Query;
}

/**
 * A fetch context whose client answers from `answer` instead of the network and records every
 * request. `request` stands for the poller's retry wrapper (default: call once).
 */
export function fakeUpstream(
  market: string,
  answer: (path: string, query: Query) => unknown,
  request: FetchContext['request'] = (fn) => fn(),
): { ctx: FetchContext; calls: Call[] } {
  const calls: Call[] = [];
  const client = {
    getJson: async (path: string, query: Query = {}) => {
      calls.push({ path, query });
      return answer(path, query);
    },
  } as unknown as UpstreamClient;
  return { ctx: { client, market, request }, calls };
}

/** Answers from canned bodies keyed by `keyOf`; any other request fails the test loudly. */
export function keyedBodies(
  bodies: Record<string, unknown>,
  keyOf: (path: string, query: Query) => string,
): (path: string, query: Query) => unknown {
  return (path, query) => {
    const key = keyOf(path, query);
    if (!(key in bodies)) throw new Error(`unexpected request ${key}`);
    return bodies[key];
  };
}
