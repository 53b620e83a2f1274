/**
 * Where a webhook may point. A subscription URL is chosen by a customer and fetched by our
 * servers, so without these checks it reaches what only we can reach: the metadata service at
 * 169.254.169.254, PostgreSQL on 127.0.0.1, the private network (SSRF). A URL is checked when it
 * is saved (IP literals, `localhost`), and every connection is checked again after DNS resolution
 * (guardedLookup): a name that resolved to a public address yesterday may resolve to 10.0.0.5 now.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { BlockList, isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';

/** `allowPrivate` (tests, local development only) lets private and loopback addresses through. */
export interface UrlPolicy {
  allowPrivate: boolean;
}

const MAX_URL_LENGTH = 2048;

// IANA's special-purpose IPv4 registry, plus the private, multicast and reserved blocks: nothing
// in these is a customer's public endpoint.
const BLOCKED_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, the cloud metadata services
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
];

// IPv6 is checked by allow list: only 2000::/3 is assigned as global unicast; everything else
// (::, ::1, fc00::/7, fe80::/10, ff00::/8, 100::/64…) is not public. IPv4-mapped and NAT64
// addresses are unwrapped first and judged as the IPv4 address they reach.
const GLOBAL_V6: readonly [string, number][] = [['2000::', 3]];
const BLOCKED_V6: readonly [string, number][] = [
  ['2001::', 23], // IETF protocol assignments (Teredo, benchmarking, ORCHID)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: reaches an IPv4 address of the sender's choosing
  ['3fff::', 20], // documentation
];

function blockList(ranges: readonly [string, number][], type: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of ranges) list.addSubnet(net, prefix, type);
  return list;
}

const blockedV4 = blockList(BLOCKED_V4, 'ipv4');
const globalV6 = blockList(GLOBAL_V6, 'ipv6');
const blockedV6 = blockList(BLOCKED_V6, 'ipv6');

/** The 16 bytes of a valid IPv6 address (as net.isIPv6 accepts it, zone id removed). */
function ipv6Bytes(ip: string): number[] {
  let text = ip;
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    // A trailing dotted quad (::ffff:127.0.0.1) is the last 32 bits.
    tail.push(
      ...text
        .slice(lastColon + 1)
        .split('.')
        .map(Number),
    );
    text = text.slice(0, lastColon + 1) + '0:0';
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const all = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = all.flatMap((g) => {
    const v = parseInt(g, 16);
    return [v >> 8, v & 0xff];
  });
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv4-mapped (::ffff:0:0/96) or NAT64 (64:ff9b::/96) address reaches. */
function embeddedIpv4(bytes: readonly number[]): string | undefined {
  const zeros = (from: number, to: number): boolean => bytes.slice(from, to).every((b) => b === 0);
  const mapped = zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff;
  const nat64 = bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12);
  return mapped || nat64 ? bytes.slice(12).join('.') : undefined;
}

/** True only for an IP address a customer's public endpoint may have; false for anything else. */
export function isPublicAddress(ip: string): boolean {
  const address = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (isIPv4(address)) return !blockedV4.check(address, 'ipv4');
  // A zone id (fe80::1%eth0) only ever comes with link-local addresses, and those are refused.
  const bare = address.split('%')[0] ?? '';
  if (!isIPv6(bare)) return false;
  const v4 = embeddedIpv4(ipv6Bytes(bare));
  if (v4 !== undefined) return !blockedV4.check(v4, 'ipv4');
  return globalV6.check(bare, 'ipv6') && !blockedV6.check(bare, 'ipv6');
}

function isLocalhostName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Whether a subscription may use this URL: http or https, no credentials, no fragment, at most
 * 2048 characters, and a host that is not a private address (by literal or by the name
 * `localhost`, which RFC 6761 reserves for loopback) unless the policy allows private ones.
 * Names are resolved at delivery time, where guardedLookup checks what they resolve to.
 */
export function checkWebhookUrl(
  raw: string,
  policy: UrlPolicy,
): { ok: true; url: URL } | { ok: false; reason: string } {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, reason: `the URL is longer than ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not a valid absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: 'the URL must use http or https' };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'the URL must not carry credentials (user:password@); sign requests instead' };
  }
  // An empty fragment ("…/#") leaves url.hash empty, so look at the text itself.
  if (raw.includes('#')) return { ok: false, reason: 'the URL must not have a fragment (#…)' };
  if (policy.allowPrivate) return { ok: true, url };
  if (isLocalhostName(url.hostname)) return { ok: false, reason: 'the URL must not point to localhost' };
  // The URL parser has already normalised IPv4 forms such as 0x7f.1 or 2130706433 to dotted quads.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0 && !isPublicAddress(host)) {
    return { ok: false, reason: `the URL must not point to a private or reserved address (${host})` };
  }
  return { ok: true, url };
}

function blockedError(hostname: string, address: string): NodeJS.ErrnoException {
  const message = `${hostname} resolves to ${address}, a private or reserved address; webhooks are not sent there`;
  // An errno-style code, as dns and net errors carry: undici passes it through as the cause.
  return Object.assign(new Error(message), { code: 'EBLOCKEDADDRESS', hostname, address });
}

/**
 * A `net.LookupFunction` for undici's `connect.lookup`: resolves as dns.lookup does, then refuses
 * (error code EBLOCKEDADDRESS) when any address is not public, so the check and the connection use
 * the same answer (no second resolution an attacker's DNS could answer differently). Every
 * address is checked, not only the first: net may try them all (happy eyeballs).
 */
export function guardedLookup(policy: UrlPolicy): LookupFunction {
  return (hostname, options, callback) => {
    const all: LookupAllOptions = { ...options, all: true };
    dnsLookup(hostname, all, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '');
      const blocked = policy.allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (blocked !== undefined) return callback(blockedError(hostname, blocked.address), '');
      if (options.all === true) return callback(null, addresses);
      const first = addresses[0];
      if (first === undefined) {
        const none: NodeJS.ErrnoException = new Error(`${hostname} resolves to no address`);
        none.code = 'ENOTFOUND';
        return callback(none, '');
      }
      callback(null, first.address, first.family);
    });
  };
}
