/** How a receiver's answer, or the lack of one, is classified (deliver.ts). */
import { describe, expect, it } from 'vitest';
import { classifyError, classifyResponse, RESPONSE_KEPT_CHARS } from './deliver.js';

const NOW = Date.UTC(2026, 0, 10, 12);

describe('classifyResponse', () => {
  it.each([200, 201, 204, 299])('%i: ok', (status) => {
    expect(classifyResponse({ status, bodyText: 'thanks' }, NOW)).toEqual({ kind: 'ok', status });
  });

  it.each([500, 502, 504, 599])('%i: retry, Retry-After ignored', (status) => {
    expect(classifyResponse({ status, bodyText: 'oops', retryAfter: '30' }, NOW)).toEqual({
      kind: 'retry',
      status,
      error: `HTTP ${status}: oops`,
    });
  });

  it.each([429, 503])('%i: retry after Retry-After (seconds or a date), clamped', (status) => {
    expect(classifyResponse({ status, bodyText: '', retryAfter: '30' }, NOW)).toMatchObject({ retryAfterMs: 30_000 });
    const date = new Date(NOW + 90_000).toUTCString();
    expect(classifyResponse({ status, bodyText: '', retryAfter: date }, NOW)).toMatchObject({ retryAfterMs: 90_000 });
    expect(classifyResponse({ status, bodyText: '', retryAfter: '0' }, NOW)).toMatchObject({ retryAfterMs: 1_000 });
    expect(classifyResponse({ status, bodyText: '' }, NOW)).not.toHaveProperty('retryAfterMs');
  });

  it.each([400, 401, 403, 404, 410, 422])('%i: fail', (status) => {
    expect(classifyResponse({ status, bodyText: 'no' }, NOW)).toEqual({
      kind: 'fail',
      status,
      error: `HTTP ${status}: no`,
    });
  });

  it('3xx: fail, never followed, naming where it pointed', () => {
    const r = classifyResponse({ status: 302, bodyText: '', location: 'http://169.254.169.254/' }, NOW);
    expect(r).toEqual({
      kind: 'fail',
      status: 302,
      error: 'HTTP 302: redirects are not followed (to http://169.254.169.254/)',
    });
  });

  it('keeps a bounded, one-line excerpt of the body', () => {
    const r = classifyResponse({ status: 500, bodyText: `line one\n\tline two ${'x'.repeat(4_000)}` }, NOW);
    expect(r.error?.startsWith('HTTP 500: line one line two x')).toBe(true);
    expect(r.error?.length).toBe('HTTP 500: '.length + RESPONSE_KEPT_CHARS);
  });
});

describe('classifyError', () => {
  const err = (code: string, message: string) => Object.assign(new Error(message), { code });

  it('a refused address is final, wherever undici wraps it', () => {
    const wrapped = Object.assign(new Error('fetch failed'), { cause: err('EBLOCKEDADDRESS', '10.0.0.5 is private') });
    expect(classifyError(wrapped, false, 10_000)).toMatchObject({ kind: 'fail' });
    expect(classifyError(wrapped, false, 10_000).error).toContain('address refused');
  });

  it('the timer: retry, saying so', () => {
    expect(classifyError(new Error('This operation was aborted'), true, 10_000)).toEqual({
      kind: 'retry',
      error: 'timed out after 10000 ms',
    });
  });

  it.each(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'UND_ERR_SOCKET', 'CERT_HAS_EXPIRED'])('%s: retry', (code) => {
    expect(classifyError(err(code, 'boom'), false, 10_000)).toEqual({ kind: 'retry', error: `${code}: boom` });
  });
});
