/**
 * Test support for adapter unit tests (not exported from the package): collect an adapter's
 * pages, and expect a promise to fail with an AppError.
 */
import { AppError } from '@skinprices/domain';
import { expect } from 'vitest';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
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
