import { describe, expect, it } from 'vitest';
import { anchors, links, problems } from './links.js';

describe('the docs link check', () => {
  it('names headings as GitHub does: code, punctuation and repeats', () => {
    const a = anchors(
      '# Operating the platform\n### API (`dist/api.mjs`)\n## Runbook\n## Runbook\n```\n# not a heading\n```\n',
    );
    expect([...a]).toEqual(['operating-the-platform', 'api-distapimjs', 'runbook', 'runbook-1']);
  });

  it('finds inline links, images and reference definitions, not code', () => {
    const md =
      'See [ops](docs/operations.md#runbook), ![flow](flow.svg "the flow").\n`[x](in-code.md)`\n\n```\n[y](fenced.md)\n```\n[ref]: docs/kafka.md\n';
    expect(links(md)).toEqual(['docs/operations.md#runbook', 'flow.svg', 'docs/kafka.md']);
  });

  it("holds for this repository's README and docs", () => {
    expect(problems()).toEqual([]);
  });
});
