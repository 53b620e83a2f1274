import { describe, expect, it } from 'vitest';
import { findCycles, importsOf } from './import-cycles.js';

describe('import cycle check', () => {
  it('finds a cycle through several modules and a self-import, and nothing in a tree', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['s', ['s']],
    ]);
    expect(findCycles(graph)).toEqual([['a', 'b', 'c'], ['s']]);
    expect(
      findCycles(
        new Map([
          ['x', ['y']],
          ['y', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('reads relative and package imports, type-only included', () => {
    const src = "import type { A } from './errors.js';\nimport { B } from '@skinprices/domain';\nimport x from 'pg';";
    const root = new URL('../..', import.meta.url).pathname;
    const file = `${root}packages/domain/src/markets.ts`;
    expect(importsOf(file, src, root.replace(/\/$/, ''))).toEqual([
      `${root}packages/domain/src/errors.ts`,
      `${root}packages/domain/src/index.ts`,
    ]);
  });
});
