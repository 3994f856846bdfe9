/** A set of addresses and networks, v4 and v6, checked by {@link IpAllowList.contains}. */
export interface IpAllowList {
  /** The entries as given. */
  readonly entries: readonly string[];
  /** True if `address` (any valid v4 or v6 form; IPv4-mapped IPv6 counts as IPv4) is in the list. */
  contains(address: string): boolean;
}

/** An address as four 32-bit words of its 128-bit IPv6 form (IPv4 as ::ffff:a.b.c.d). */
type Words = [number, number, number, number];

interface Network {
  words: Words;
  /** Prefix length in the 128-bit space. */
  bits: number;
}

const DECIMAL = /^(0|[1-9][0-9]{0,2})$/;

/**
 * Parses one address strictly: four-part dotted decimal for IPv4 (no `inet_aton` forms such as
 * `127.1`, `0x7f.0.0.1` or `2130706433`), any valid RFC 4291 text for IPv6. Returns the 128-bit
 * form, IPv4 mapped into ::ffff:0:0/96 so that both spellings of one host compare equal.
 */
function parseWords(text: string): Words | undefined {
  if (!text.includes(':')) {
    const v4 = parseDottedQuad(text);
    return v4 === undefined ? undefined : [0, 0, 0xffff, v4];
  }
  // The common dual-stack spelling of an IPv4 client, read without the general IPv6 parser.
  if (
    text.length <= 22 &&
    (text.startsWith('::ffff:') || text.startsWith('::FFFF:')) &&
    text.indexOf(':', 7) === -1
  ) {
    const v4 = parseDottedQuad(text.slice(7));
    if (v4 !== undefined) return [0, 0, 0xffff, v4];
  }
  const hex = dottedTailToHex(text);
  const p = hex === undefined ? undefined : parseGroups(hex);
  if (p === undefined) return undefined;
  const w = (i: number) => ((((p[i] as number) << 16) | (p[i + 1] as number)) >>> 0) as number;
  return [w(0), w(2), w(4), w(6)];
}

/**
 * The eight 16-bit groups of IPv6 text in hex (RFC 4291): groups of one to four hex digits,
 * either case, separated by `:`, with at most one `::` that stands for one or more zero groups.
 * The dotted tail is rewritten first ({@link dottedTailToHex}). The tests compare it with ipaddr.js.
 */
function parseGroups(text: string): number[] | undefined {
  const gap = text.indexOf('::');
  if (gap !== -1 && text.indexOf('::', gap + 1) !== -1) return undefined;
  const head = hexGroups(gap === -1 ? text : text.slice(0, gap));
  const tail = gap === -1 ? [] : hexGroups(text.slice(gap + 2));
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (gap === -1 ? missing !== 0 : missing < 1) return undefined;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}

const HEX_GROUP = /^[0-9a-f]{1,4}$/i;

/** The groups of `a:b:c` (none for the empty text), or undefined if one is not 1 to 4 hex digits. */
function hexGroups(text: string): number[] | undefined {
  if (text === '') return [];
  const groups = text.split(':');
  return groups.every((group) => HEX_GROUP.test(group))
    ? groups.map((group) => Number.parseInt(group, 16))
    : undefined;
}

/**
 * IPv6 groups as RFC 5952 writes them: lower-case hex without leading zeros, the longest run of two
 * or more zero groups (the first of equal runs) written `::`.
 */
function formatGroups(groups: readonly number[]): string {
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < groups.length; ) {
    let j = i;
    while (j < groups.length && groups[j] === 0) j++;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}

/**
 * Strict four-part decimal IPv4 (no leading zeros, no `inet_aton` short, hex or octal forms),
 * as an unsigned 32-bit number: the rule of ipaddr.js's `isValidFourPartDecimal` (the reference
 * the tests compare with), without regular expressions, because this runs on every request.
 */
function parseDottedQuad(text: string): number | undefined {
  let value = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i === text.length ? 0x2e : text.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || part > 255 || ++parts > 4) return undefined;
      value = value * 256 + part;
      part = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits === 1 && part === 0) return undefined; // a leading zero
      if (++digits > 3) return undefined;
      part = part * 10 + (c - 0x30);
    } else {
      return undefined;
    }
  }
  return parts === 4 ? value : undefined;
}

/**
 * IPv6 text whose last 32 bits are written as dotted IPv4 (`::ffff:192.0.2.1`, `64:ff9b::192.0.2.1`),
 * rewritten with those bits in hex, so that each form keeps its own 128 bits and only the mapped
 * form equals an IPv4 address (the deprecated IPv4-compatible `::192.0.2.1` does not match the IPv4
 * entry `192.0.2.1`).
 */
function dottedTailToHex(text: string): string | undefined {
  if (!text.includes('.')) return text;
  const colon = text.lastIndexOf(':');
  const v4 = parseDottedQuad(text.slice(colon + 1));
  if (v4 === undefined) return undefined;
  return `${text.slice(0, colon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
}

function isMapped(words: Words): boolean {
  return words[0] === 0 && words[1] === 0 && words[2] === 0xffff;
}

function inNetwork(words: Words, network: Network): boolean {
  let bits = network.bits;
  for (let i = 0; i < 4 && bits > 0; i++) {
    const take = Math.min(32, bits);
    const mask = take === 32 ? 0xffffffff : ~(0xffffffff >>> take) >>> 0;
    if (((words[i] as number) & mask) >>> 0 !== ((network.words[i] as number) & mask) >>> 0) return false;
    bits -= take;
  }
  return true;
}

function parseEntry(entry: unknown): Network | undefined {
  if (typeof entry !== 'string') return undefined;
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  if (address.includes('%')) return undefined; // a zone id names an interface, not a network
  const words = parseWords(address);
  if (!words) return undefined;
  const v4 = !address.includes(':');
  const max = v4 ? 32 : 128;
  let bits = max;
  if (slash !== -1) {
    const prefix = entry.slice(slash + 1);
    if (!DECIMAL.test(prefix) || Number(prefix) > max) return undefined;
    bits = Number(prefix);
  }
  return { words, bits: v4 ? 96 + bits : bits };
}

/**
 * Creates an allow-list of IPv4 and IPv6 addresses and CIDR networks. Parsing is strict and done
 * once, here: an entry that is not a four-part decimal IPv4 address, a valid IPv6 address, or one
 * of those with a prefix length in range is a TypeError naming the entry. A network written with
 * host bits set (`10.1.2.3/8`) means the network that contains it (`10.0.0.0/8`).
 *
 * IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) match their IPv4 entries and the other way
 * round, because dual-stack servers report IPv4 clients in that form.
 *
 * @example
 * ```ts
 * const allowed = createIpAllowList(['203.0.113.10', '198.51.100.0/24', '2001:db8::/32']);
 * allowed.contains('::ffff:203.0.113.10'); // true
 * allowed.contains('192.0.2.1'); // false
 * ```
 */
export function createIpAllowList(entries: readonly string[]): IpAllowList {
  if (!Array.isArray(entries))
    throw new TypeError('An IP allow-list is an array of addresses and CIDR networks.');
  const networks = entries.map((entry) => {
    const network = parseEntry(entry);
    if (!network) {
      throw new TypeError(
        `Invalid IP allow-list entry: ${JSON.stringify(entry)} (expected an IPv4 address in four-part decimal, an IPv6 address, or either with a /prefix).`,
      );
    }
    return network;
  });
  const frozen = Object.freeze([...entries]);
  return {
    entries: frozen,
    contains(address: string): boolean {
      const words = typeof address === 'string' ? parseWords(stripZone(address)) : undefined;
      if (!words) return false;
      for (const network of networks) if (inNetwork(words, network)) return true;
      return false;
    },
  };
}

function stripZone(address: string): string {
  const zone = address.indexOf('%');
  return zone === -1 ? address : address.slice(0, zone);
}

/**
 * An address in one canonical text form: IPv4-mapped IPv6 as dotted IPv4, other IPv6 compressed
 * and lower-case, zone id dropped; `undefined` if it is not a strictly valid address.
 *
 * @example
 * ```ts
 * normalizeIp('::FFFF:127.0.0.1'); // '127.0.0.1'
 * normalizeIp('2001:DB8:0:0::1'); // '2001:db8::1'
 * ```
 */
export function normalizeIp(address: string | undefined): string | undefined {
  if (typeof address !== 'string') return undefined;
  const bare = stripZone(address.trim());
  const words = parseWords(bare);
  if (!words) return undefined;
  if (isMapped(words)) {
    const v = words[3];
    return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  const groups: number[] = [];
  for (const word of words) groups.push(word >>> 16, word & 0xffff);
  return formatGroups(groups);
}

/** Where {@link resolveClientIp} reads the client address from. */
export interface ClientIpInput {
  /** The socket's peer address. */
  remoteAddress: string | undefined;
  /** X-Forwarded-For: one header value, or several header lines in order. */
  forwardedFor?: string | readonly string[] | undefined;
  /** Proxies whose X-Forwarded-For is believed; without them the header is ignored. */
  trustedProxies?: IpAllowList | readonly string[] | undefined;
}

/**
 * The client's address behind trusted proxies: the chain is X-Forwarded-For followed by the
 * socket's peer, walked from the right; each trusted proxy passes the walk one step left, and the
 * first address that is not a trusted proxy is the client. Entries a client wrote into the header
 * itself sit left of that point and are never read. Never a hop count.
 *
 * An entry that is not a valid address stops the walk at the proxy that reported it: that proxy
 * is then treated as the client, which an allow-list refuses unless it lists the proxy.
 *
 * @example
 * ```ts
 * resolveClientIp({
 *   remoteAddress: '10.0.0.2',
 *   forwardedFor: '198.51.100.1, 203.0.113.7',
 *   trustedProxies: ['10.0.0.0/8'],
 * }); // '203.0.113.7'
 * ```
 */
export function resolveClientIp(input: ClientIpInput): string | undefined {
  let current = normalizeIp(input.remoteAddress);
  const trusted = Array.isArray(input.trustedProxies)
    ? createIpAllowList(input.trustedProxies)
    : (input.trustedProxies as IpAllowList | undefined);
  if (current === undefined || !trusted || trusted.entries.length === 0 || input.forwardedFor === undefined) {
    return current;
  }
  const header = typeof input.forwardedFor === 'string' ? input.forwardedFor : input.forwardedFor.join(',');
  const hops = header.split(',');
  for (let i = hops.length - 1; i >= 0 && trusted.contains(current); i--) {
    const hop = normalizeIp(hops[i] as string);
    if (hop === undefined) return current;
    current = hop;
  }
  return current;
}
