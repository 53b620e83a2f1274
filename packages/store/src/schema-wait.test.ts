import { describe, expect, it } from 'vitest';
import { unmetNeeds } from './schema-wait.js';

describe('unmetNeeds', () => {
  const contract = { api_a_v1: { id: 'bigint', name: 'text?' }, api_b_v1: { at: 'timestamptz' } } as const;

  it('is empty when every relation and column is there with its type, extra ones allowed', () => {
    const views = { api_a_v1: { id: 'bigint', name: 'text', more: 'integer' }, api_b_v1: { at: 'timestamptz' } };
    expect(unmetNeeds({ ...views, api_c_v2: { x: 'text' } }, contract)).toEqual([]);
  });

  it('names missing relations, missing columns and columns of another type', () => {
    expect(unmetNeeds({ api_a_v1: { id: 'integer' } }, contract)).toEqual([
      'api_a_v1.id is integer, needed bigint',
      'api_a_v1.name is missing',
      'api_b_v1 is missing',
    ]);
  });
});
