import { lookup as dnsLookup } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, guardedLookup, isPublicAddress, type UrlPolicy } from './url-policy.js';

const strict: UrlPolicy = { allowPrivate: false };
const lenient: UrlPolicy = { allowPrivate: true };

// [address, what it is]: none of these is a customer's public endpoint.
const NOT_PUBLIC: [string, string][] = [
  ['10.0.0.1', '10/8'],
  ['10.255.255.255', '10/8'],
  ['172.16.0.1', '172.16/12'],
  ['172.31.255.254', '172.16/12'],
  ['192.168.1.1', '192.168/16'],
  ['127.0.0.1', '127/8'],
  ['127.1.2.3', '127/8'],
  ['169.254.169.254', 'link-local, cloud metadata'],
  ['100.64.0.1', 'CGNAT'],
  ['100.127.255.255', 'CGNAT'],
  ['0.0.0.0', '0/8'],
  ['0.1.2.3', '0/8'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['192.0.2.10', 'TEST-NET-1'],
  ['198.51.100.7', 'TEST-NET-2'],
  ['203.0.113.9', 'TEST-NET-3'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['::1', 'IPv6 loopback'],
  ['::', 'IPv6 unspecified'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local with a zone'],
  ['febf:ffff::1', 'link-local'],
  ['fc00::1', 'ULA'],
  ['fd12:3456::1', 'ULA'],
  ['ff02::1', 'multicast'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
  ['::ffff:10.1.2.3', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
  ['64:ff9b::7f00:1', 'NAT64 of loopback'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 of metadata'],
  ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
  ['2001:db8::1', 'documentation'],
  ['2002:7f00:1::1', '6to4'],
  ['2001::1', 'Teredo'],
  ['100::1', 'discard'],
  ['not-an-ip', 'not an address'],
  ['', 'empty'],
  ['999.1.1.1', 'not an address'],
];

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '172.15.255.255',
  '172.32.0.1',
  '100.63.255.255',
  '100.128.0.1',
  '192.169.0.1',
  '223.255.255.255',
  '2606:4700::1111',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
  '64:ff9b::808:808',
  '[2606:4700::1111]',
];

describe('isPublicAddress', () => {
  it.each(NOT_PUBLIC)('refuses %s (%s)', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each(PUBLIC)('accepts %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });
});

describe('checkWebhookUrl', () => {
  const reason = (raw: string, policy = strict) => {
    const r = checkWebhookUrl(raw, policy);
    return r.ok ? 'ok' : r.reason;
  };

  it('accepts public http and https URLs', () => {
    const r = checkWebhookUrl('https://hooks.example.com:8443/in?x=1', strict);
    expect(r.ok && r.url.hostname).toBe('hooks.example.com');
    expect(reason('http://8.8.8.8/hook')).toBe('ok');
    expect(reason('https://[2606:4700::1111]/hook')).toBe('ok');
  });

  it.each([
    ['ftp://example.com/x', /http or https/],
    ['file:///etc/passwd', /http or https/],
    ['javascript:alert(1)', /http or https/],
    ['https://user:pw@example.com/', /credentials/],
    ['https://user@example.com/', /credentials/],
    ['https://example.com/#frag', /fragment/],
    ['https://example.com/#', /fragment/],
    ['/relative', /valid absolute URL/],
    ['not a url', /valid absolute URL/],
    [`https://example.com/${'a'.repeat(2048)}`, /2048/],
    ['http://localhost:8080/', /localhost/],
    ['http://LOCALHOST./', /localhost/],
    ['http://api.localhost/', /localhost/],
    ['http://127.0.0.1/', /private or reserved/],
    ['http://0x7f.1/', /private or reserved/],
    ['http://2130706433/', /private or reserved/],
    ['http://[::1]/', /private or reserved/],
    ['http://[::ffff:127.0.0.1]/', /private or reserved/],
    ['http://[64:ff9b::7f00:1]/', /private or reserved/],
    ['http://169.254.169.254/latest/meta-data', /private or reserved/],
    ['http://10.0.0.5/', /private or reserved/],
    ['http://[fd00::1]/', /private or reserved/],
  ])('refuses %s', (raw, why) => {
    expect(reason(raw)).toMatch(why);
  });

  it('lets private and loopback addresses through when the policy allows them', () => {
    for (const raw of ['http://127.0.0.1:3000/h', 'http://localhost/', 'http://[::1]/', 'http://10.0.0.5/']) {
      expect(reason(raw, lenient)).toBe('ok');
    }
    // The other rules still hold.
    expect(reason('ftp://127.0.0.1/', lenient)).toMatch(/http or https/);
    expect(reason('http://u:p@127.0.0.1/', lenient)).toMatch(/credentials/);
  });
});

type LookupResult = { err: NodeJS.ErrnoException | null; address: unknown; family?: number };

function runLookup(policy: UrlPolicy, hostname: string, options: object): Promise<LookupResult> {
  return new Promise((resolve) => {
    guardedLookup(policy)(hostname, options, (err, address, family) => resolve({ err, address, family }));
  });
}

describe('guardedLookup', () => {
  it('fails with EBLOCKEDADDRESS for a name that resolves to loopback', async () => {
    for (const options of [{}, { all: true }, { family: 4 }]) {
      const { err } = await runLookup(strict, 'localhost', options);
      expect(err?.code).toBe('EBLOCKEDADDRESS');
      expect(err?.message).toMatch(/localhost resolves to/);
    }
  });

  it('fails for an IP literal that is private', async () => {
    const { err } = await runLookup(strict, '10.1.2.3', {});
    expect(err?.code).toBe('EBLOCKEDADDRESS');
  });

  it('resolves as dns.lookup does when private addresses are allowed', async () => {
    const single = await runLookup(lenient, 'localhost', { family: 4 });
    expect(single).toEqual({ err: null, address: '127.0.0.1', family: 4 });
    const all = await runLookup(lenient, 'localhost', { all: true });
    expect(all.err).toBeNull();
    expect(all.address).toEqual(
      await new Promise((resolve) => dnsLookup('localhost', { all: true }, (_e, addresses) => resolve(addresses))),
    );
  });

  it('lets public addresses through', async () => {
    expect(await runLookup(strict, '8.8.8.8', {})).toEqual({ err: null, address: '8.8.8.8', family: 4 });
    expect(await runLookup(strict, '2606:4700::1111', { all: true })).toEqual({
      err: null,
      address: [{ address: '2606:4700::1111', family: 6 }],
      family: undefined,
    });
  });

  it('passes a resolution error through', async () => {
    const { err } = await runLookup(strict, 'no-such-host.invalid', {});
    expect(err?.code).toMatch(/ENOTFOUND|EAI_AGAIN/);
  });
});
