import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { createIpAllowList, normalizeIp, resolveClientIp } from '../src/ip.js';

describe('createIpAllowList', () => {
  const list = createIpAllowList([
    '203.0.113.10',
    '198.51.100.0/24',
    '10.0.0.0/8',
    '2001:db8::/32',
    '::1',
    '0.0.0.0/32',
  ]);

  it.each([
    ['203.0.113.10', true],
    ['203.0.113.11', false],
    ['198.51.100.0', true],
    ['198.51.100.255', true],
    ['198.51.101.0', false],
    ['198.51.99.255', false],
    ['10.255.255.255', true],
    ['11.0.0.0', false],
    ['::ffff:203.0.113.10', true],
    ['::ffff:cb00:710a', true],
    ['::FFFF:198.51.100.7', true],
    ['2001:db8::1', true],
    ['2001:DB8:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['2001:db9::', false],
    ['::1', true],
    ['0:0:0:0:0:0:0:1', true],
    ['::2', false],
    ['fe80::1%eth0', false],
    ['0.0.0.0', true],
    ['not an ip', false],
    ['', false],
    ['127.1', false],
    ['0x7f.0.0.1', false],
  ])('contains(%s) is %s', (address, expected) => {
    expect(list.contains(address)).toBe(expected);
  });

  it('matches an IPv4 entry with the mapped form only, never the IPv4-compatible ::a.b.c.d', () => {
    const v4 = createIpAllowList(['203.0.113.10', '198.51.100.0/24']);
    for (const address of ['::203.0.113.10', '::cb00:710a', '0:0:0:0:0:0:203.0.113.10', '::198.51.100.7']) {
      expect(v4.contains(address), address).toBe(false);
    }
    expect(v4.contains('::ffff:203.0.113.10')).toBe(true);
    expect(normalizeIp('::203.0.113.10')).toBe('::cb00:710a');
    expect(
      resolveClientIp({
        remoteAddress: '10.0.0.2',
        forwardedFor: '::203.0.113.10',
        trustedProxies: ['10.0.0.0/8'],
      }),
    ).toBe('::cb00:710a');
    // Dotted and hex spellings of one IPv6 address are one address.
    const compatible = createIpAllowList(['::203.0.113.10']);
    expect(compatible.contains('::cb00:710a')).toBe(true);
    expect(compatible.contains('203.0.113.10')).toBe(false);
  });

  it('matches IPv4 addresses against IPv4-mapped entries', () => {
    const mapped = createIpAllowList(['::ffff:192.0.2.0/120', '::ffff:7f00:1']);
    expect(mapped.contains('192.0.2.200')).toBe(true);
    expect(mapped.contains('192.0.3.1')).toBe(false);
    expect(mapped.contains('127.0.0.1')).toBe(true);
  });

  it('handles /0, /32, /128 and zone ids on the checked address', () => {
    expect(createIpAllowList(['0.0.0.0/0']).contains('255.255.255.255')).toBe(true);
    expect(createIpAllowList(['0.0.0.0/0']).contains('2001:db8::1')).toBe(false);
    expect(createIpAllowList(['::/0']).contains('2001:db8::1')).toBe(true);
    expect(createIpAllowList(['192.0.2.1/32']).contains('192.0.2.1')).toBe(true);
    expect(createIpAllowList(['fe80::1/128']).contains('fe80::1%eth0')).toBe(true);
    expect(createIpAllowList(['10.1.2.3/8']).contains('10.200.0.1')).toBe(true);
  });

  it.each([
    '0x7f.1',
    '127.1',
    '2130706433',
    '010.0.0.1',
    '0x7f000001',
    '1.2.3.4/33',
    '::1/129',
    '1.2.3.4/',
    '/8',
    '1.2.3.4/08',
    '1.2.3.4/+8',
    '1.2.3.4/8x',
    'abc',
    '',
    ' 1.2.3.4',
    '1.2.3.4.5',
    '256.0.0.1',
    'fe80::1%eth0',
    ':::1',
  ])('rejects %j at creation with a TypeError naming it', (entry) => {
    expect(() => createIpAllowList([entry])).toThrow(TypeError);
    expect(() => createIpAllowList([entry])).toThrow(JSON.stringify(entry));
  });

  it('any IPv4 address is in its /24, matches its mapped form, and not a /32 of another', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.ipV4(), (address, other) => {
        const [a, b, c] = address.split('.');
        expect(createIpAllowList([`${a}.${b}.${c}.0/24`]).contains(address)).toBe(true);
        expect(createIpAllowList([address]).contains(`::ffff:${address}`)).toBe(true);
        expect(createIpAllowList([`${other}/32`]).contains(address)).toBe(address === other);
      }),
    );
  });
});

describe('normalizeIp', () => {
  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::FFFF:7f00:1', '127.0.0.1'],
    ['2001:DB8:0:0::1', '2001:db8::1'],
    ['fe80::1%eth0', 'fe80::1'],
    ['192.0.2.1', '192.0.2.1'],
    ['127.1', undefined],
    [undefined, undefined],
  ])('%s -> %s', (input, expected) => {
    expect(normalizeIp(input)).toBe(expected);
  });
});

describe('resolveClientIp', () => {
  const trustedProxies = ['10.0.0.0/8', '::1'];

  it('is the socket address without trusted proxies, whatever the header says', () => {
    expect(resolveClientIp({ remoteAddress: '::ffff:198.51.100.1', forwardedFor: '203.0.113.7' })).toBe(
      '198.51.100.1',
    );
  });

  it('walks from the right past trusted proxies', () => {
    expect(resolveClientIp({ remoteAddress: '10.0.0.2', forwardedFor: '203.0.113.7', trustedProxies })).toBe(
      '203.0.113.7',
    );
    expect(
      resolveClientIp({
        remoteAddress: '10.0.0.2',
        forwardedFor: '203.0.113.7, 10.0.0.9, 10.1.1.1',
        trustedProxies,
      }),
    ).toBe('203.0.113.7');
  });

  it('ignores what a client wrote to the left of the last untrusted hop (spoofing)', () => {
    // The client sent "X-Forwarded-For: 203.0.113.7" itself; the trusted proxy appended the real peer.
    expect(
      resolveClientIp({
        remoteAddress: '10.0.0.2',
        forwardedFor: '203.0.113.7, 198.51.100.23',
        trustedProxies,
      }),
    ).toBe('198.51.100.23');
  });

  it('does not read the header when the peer is not a trusted proxy', () => {
    expect(
      resolveClientIp({ remoteAddress: '198.51.100.1', forwardedFor: '203.0.113.7', trustedProxies }),
    ).toBe('198.51.100.1');
  });

  it('joins several header lines in order and trims whitespace', () => {
    expect(
      resolveClientIp({
        remoteAddress: '::1',
        forwardedFor: ['198.51.100.9 ', ' 203.0.113.7,10.0.0.3'],
        trustedProxies,
      }),
    ).toBe('203.0.113.7');
  });

  it('stops at the proxy that reported an invalid entry', () => {
    expect(
      resolveClientIp({ remoteAddress: '10.0.0.2', forwardedFor: '203.0.113.7, garbage', trustedProxies }),
    ).toBe('10.0.0.2');
    expect(resolveClientIp({ remoteAddress: '10.0.0.2', forwardedFor: '127.1', trustedProxies })).toBe(
      '10.0.0.2',
    );
  });

  it('returns the leftmost address when every hop is trusted', () => {
    expect(resolveClientIp({ remoteAddress: '10.0.0.2', forwardedFor: '10.0.0.5', trustedProxies })).toBe(
      '10.0.0.5',
    );
  });

  it('returns undefined for an unusable socket address', () => {
    expect(resolveClientIp({ remoteAddress: undefined })).toBeUndefined();
  });
});

describe('the hand-written IPv4 and IPv6 parsers agree with ipaddr.js', () => {
  /** What ipaddr.js makes of an address, with the strict rules of this module. */
  function reference(input: string): string | undefined {
    const trimmed = input.trim();
    const zone = trimmed.indexOf('%');
    const bare = zone === -1 ? trimmed : trimmed.slice(0, zone);
    if (!bare.includes(':')) {
      return ipaddr.IPv4.isValidFourPartDecimal(bare) ? ipaddr.IPv4.parse(bare).toString() : undefined;
    }
    // ipaddr.js reads every dotted tail as IPv4-mapped; the bits are the address, so spell them in hex.
    let hex = bare;
    const colon = bare.lastIndexOf(':');
    if (bare.includes('.')) {
      const tail = bare.slice(colon + 1);
      if (!ipaddr.IPv4.isValidFourPartDecimal(tail)) return undefined;
      const [a, b, c, d] = ipaddr.IPv4.parse(tail).toByteArray() as [number, number, number, number];
      hex = `${bare.slice(0, colon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
    }
    if (!ipaddr.IPv6.isValid(hex)) return undefined;
    const address = ipaddr.IPv6.parse(hex);
    return address.isIPv4MappedAddress() ? address.toIPv4Address().toString() : address.toString();
  }

  const octet = fc.oneof(
    fc.integer({ min: 0, max: 255 }).map(String),
    fc.constantFrom('00', '01', '256', '999', '', 'x'),
  );
  const v4ish = fc
    .tuple(octet, octet, octet, octet, fc.constantFrom('', '.1', '.'))
    .map(([a, b, c, d, e]) => `${a}.${b}.${c}.${d}${e}`);
  // IPv6-like text near the rules' edges: empty, long and oversized groups, several `::`, 1 to 10 groups.
  const v6ish = fc
    .array(
      fc.tuple(
        fc.constantFrom('', '0', '00000', '0000ffff', 'fFfF', '10000', '1', 'abc', 'g'),
        fc.constantFrom(':', ':', '::'),
      ),
      { minLength: 1, maxLength: 10 },
    )
    .map((parts) => parts.map(([group, separator]) => group + separator).join(''))
    .chain((text) => fc.constantFrom(text, text.slice(0, -1), `::${text}`, `${text}1`));
  const address = fc.oneof(
    v6ish,
    fc.ipV4(),
    fc.ipV4Extended(),
    v4ish,
    fc.ipV6(),
    fc.ipV4().map((v4) => `::ffff:${v4}`),
    fc.ipV4().map((v4) => `::FFFF:${v4}`),
    v4ish.map((v4) => `::ffff:${v4}`),
    fc.ipV4().map((v4) => `::ffff:${v4}%eth0`),
    fc.ipV4().map((v4) => `::${v4}`),
    fc.ipV4().map((v4) => `64:ff9b::${v4}`),
    fc.ipV4().map((v4) => ` ${v4} `),
    fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF.:%f '.split('')), maxLength: 24 }),
  );

  it('normalizes every input as ipaddr.js reads it', () => {
    fc.assert(
      fc.property(address, (input) => {
        expect(normalizeIp(input), input).toBe(reference(input));
      }),
      { numRuns: 5000 },
    );
  });

  it('matches allow-list entries as ipaddr.js matches them', () => {
    const entries = ['127.0.0.1', '10.0.0.0/8', '192.0.2.128/25', '2001:db8::/32', '::ffff:198.51.100.0/120'];
    const allowed = createIpAllowList(entries);
    const networks = entries.map((entry) => ipaddr.parseCIDR(entry.includes('/') ? entry : `${entry}/32`));
    const referenceContains = (input: string) => {
      // contains() reads addresses as they come, surrounding whitespace included (and refused).
      if (input !== input.trim()) return false;
      const normalized = reference(input);
      if (normalized === undefined) return false;
      const parsed = ipaddr.parse(normalized);
      return networks.some(([network, bits]) => {
        // An IPv4-mapped network matches IPv4 addresses, and an IPv4 network their mapped form.
        if (parsed.kind() === network.kind()) return parsed.match(network, bits);
        if (network.kind() === 'ipv6' && (network as ipaddr.IPv6).isIPv4MappedAddress()) {
          return (
            parsed.kind() === 'ipv4' && parsed.match((network as ipaddr.IPv6).toIPv4Address(), bits - 96)
          );
        }
        return false;
      });
    };
    const near = fc.oneof(
      address,
      fc.integer({ min: 0, max: 255 }).map((n) => `10.${n}.0.1`),
      fc.integer({ min: 0, max: 255 }).map((n) => `192.0.2.${n}`),
      fc.integer({ min: 0, max: 255 }).map((n) => `::ffff:198.51.100.${n}`),
      fc.integer({ min: 0, max: 255 }).map((n) => `198.51.100.${n}`),
      fc.integer({ min: 0, max: 255 }).map((n) => ` 10.${n}.0.1`),
    );
    fc.assert(
      fc.property(near, (input) => {
        expect(allowed.contains(input), input).toBe(referenceContains(input));
      }),
      { numRuns: 5000 },
    );
  });
});
