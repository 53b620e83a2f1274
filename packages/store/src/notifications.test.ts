import { describe, expect, it } from 'vitest';
import { parsePayload } from './notifications.js';

describe('NOTIFY payloads', () => {
  it('parses the schema and the tags of a NOTIFY payload (untagged payloads stay valid)', () => {
    expect(parsePayload('readmodel')).toEqual({ schema: 'readmodel' });
    expect(parsePayload('readmodel\tlisting:cn-a,derived')).toEqual({
      schema: 'readmodel',
      tags: ['listing:cn-a', 'derived'],
    });
  });
});
