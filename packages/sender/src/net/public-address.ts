import ipaddr from 'ipaddr.js';

/** Why an address may not receive webhooks, or `public`. */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'carrier_nat'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'invalid';

// ipaddr.js names the IANA special-purpose ranges; each maps to the reason given to the caller.
const V4: Record<string, AddressClass> = {
  unicast: 'public',
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link_local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier_nat',
  private: 'private',
  reserved: 'reserved',
};

const V6: Record<string, AddressClass> = {
  unicast: 'public',
  unspecified: 'unspecified',
  linkLocal: 'link_local',
  multicast: 'multicast',
  loopback: 'loopback',
  uniqueLocal: 'private',
  deprecatedSiteLocal: 'private',
};

/**
 * Classifies one IP address (any text form `ipaddr.js` reads: dotted IPv4, IPv6 with or without
 * brackets) for webhook delivery: only public unicast addresses may receive events. IPv4 embedded
 * in IPv6 is judged as the IPv4 address it carries: IPv4-mapped (`::ffff:127.0.0.1`), NAT64
 * (`64:ff9b::7f00:1`), 6to4 (`2002:7f00:1::`); the deprecated IPv4-compatible form (`::7f00:1`),
 * Teredo and every IPv6 range outside global unicast (2000::/3) are refused.
 *
 * @example
 * ```ts
 * classifyAddress('203.0.113.10'); // 'reserved' (documentation range)
 * classifyAddress('::ffff:10.0.0.1'); // 'private'
 * classifyAddress('8.8.8.8'); // 'public'
 * ```
 */
export function classifyAddress(address: string): AddressClass {
  const text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return V4[ipaddr.IPv4.parse(text).range()] ?? 'reserved';
  if (!text.includes(':') || !ipaddr.IPv6.isValid(text) || text.includes('%')) return 'invalid';
  const v6 = ipaddr.IPv6.parse(text);
  const range = v6.range();
  const parts = v6.parts;
  if (range === 'ipv4Mapped') return classifyAddress(v6.toIPv4Address().toString());
  if (range === 'rfc6052' && parts[2] === 0 && parts[3] === 0 && parts[4] === 0 && parts[5] === 0) {
    // 64:ff9b::/96: the well-known NAT64 prefix, last 32 bits an IPv4 address.
    return classifyAddress(ipaddr.fromByteArray(v6.toByteArray().slice(12)).toString());
  }
  if (range === '6to4') {
    return classifyAddress(ipaddr.fromByteArray(v6.toByteArray().slice(2, 6)).toString());
  }
  if (range === 'unicast' && parts.slice(0, 6).every((p) => p === 0)) return 'reserved'; // ::/96, IPv4-compatible
  const mapped = V6[range];
  if (mapped === 'public' && ((parts[0] as number) & 0xe000) !== 0x2000) return 'reserved'; // outside 2000::/3
  return mapped ?? 'reserved';
}

/**
 * True if webhooks may be delivered to `address` (see {@link classifyAddress}).
 *
 * @example
 * ```ts
 * isPublicAddress('127.0.0.1'); // false
 * ```
 */
export function isPublicAddress(address: string): boolean {
  return classifyAddress(address) === 'public';
}
