import { createHmac } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * An independent model of what a receiver must answer to a webhook body, written from docs/design.md
 * ("The wire format", "Canonicalization on the receiving side") and docs/decisions.md,
 * sharing no code with payhook: RFC 8785 through the `canonicalize` package, HMAC through
 * node:crypto, and a small JSON reader of its own for duplicate keys, depth and the lexical form.
 */

/** The answer classes a body can get from a receiver in its default (`auto`) mode. */
export type Verdict = 'accepted' | 'malformed_payload' | 'invalid_checksum';

/** The receiver's default depth limit: levels of objects and arrays, the envelope counting as one. */
export const REFERENCE_MAX_DEPTH = 64;

/** A JSON value as written: tokens (strings, numbers, literals) keep their exact text. */
export type JsonNode =
  | { kind: 'token'; raw: string }
  | { kind: 'array'; items: JsonNode[] }
  | { kind: 'object'; members: JsonMember[] };

/** An object member: its key as written, its key decoded, and its value. */
export interface JsonMember {
  keyRaw: string;
  key: string;
  value: JsonNode;
}

/** Why {@link readTree} refused a text that `JSON.parse` accepts. */
export class TreeError extends Error {}

/**
 * Reads JSON text that `JSON.parse` has accepted into a {@link JsonNode} tree that keeps every
 * token as written. With `strict`, duplicate keys (equal once decoded) and nesting deeper than
 * `maxDepth` throw a {@link TreeError}; without, any tree is returned (the mutators use that).
 */
export function readTree(text: string, options: { strict: boolean; maxDepth?: number }): JsonNode {
  const maxDepth = options.maxDepth ?? REFERENCE_MAX_DEPTH;
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
  };
  const string = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return text.slice(start, i);
  };
  const value = (depth: number): JsonNode => {
    ws();
    const c = text[i];
    if (c === '{' || c === '[') {
      if (options.strict && depth + 1 > maxDepth) throw new TreeError('too deep');
      i++;
      ws();
      if (c === '[') {
        const items: JsonNode[] = [];
        if (text[i] === ']') {
          i++;
          return { kind: 'array', items };
        }
        for (;;) {
          items.push(value(depth + 1));
          ws();
          if (text[i++] === ']') return { kind: 'array', items };
        }
      }
      const members: JsonMember[] = [];
      const seen = new Set<string>();
      if (text[i] === '}') {
        i++;
        return { kind: 'object', members };
      }
      for (;;) {
        ws();
        const keyRaw = string();
        const key = JSON.parse(keyRaw) as string;
        if (options.strict && seen.has(key)) throw new TreeError(`duplicate key ${keyRaw}`);
        seen.add(key);
        ws();
        i++; // ':'
        members.push({ keyRaw, key, value: value(depth + 1) });
        ws();
        if (text[i++] === '}') return { kind: 'object', members };
      }
    }
    if (c === '"') return { kind: 'token', raw: string() };
    const start = i;
    while (i < text.length && !',]} \t\n\r'.includes(text[i] as string)) i++;
    return { kind: 'token', raw: text.slice(start, i) };
  };
  return value(0);
}

/**
 * The lexical canonical form of a value: keys sorted by the UTF-16 code units of their decoded
 * text, no whitespace, every token exactly as written. `omitChecksum` leaves out a `checksum`
 * member of this object (the top level of `data`).
 */
export function lexicalText(node: JsonNode, omitChecksum = false): string {
  if (node.kind === 'token') return node.raw;
  if (node.kind === 'array') return `[${node.items.map((item) => lexicalText(item)).join(',')}]`;
  const members = node.members
    .filter((m) => !(omitChecksum && m.key === 'checksum'))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return `{${members.map((m) => `${m.keyRaw}:${lexicalText(m.value)}`).join(',')}}`;
}

/** Serializes a tree back to text, with `gap` (whitespace) between tokens. */
export function writeTree(node: JsonNode, gap = ''): string {
  if (node.kind === 'token') return node.raw;
  if (node.kind === 'array')
    return `[${gap}${node.items.map((n) => writeTree(n, gap)).join(`,${gap}`)}${gap}]`;
  return `{${gap}${node.members.map((m) => `${m.keyRaw}:${gap}${writeTree(m.value, gap)}`).join(`,${gap}`)}${gap}}`;
}

/** Lower-case hex HMAC-SHA256 of `message`, keyed by the UTF-8 bytes of the business id. */
export function hmacHex(businessId: string, message: string): string {
  return createHmac('sha256', Buffer.from(businessId, 'utf8')).update(message, 'utf8').digest('hex');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `data` without a top-level `checksum` key, as the wire format signs it. */
export function withoutChecksum(data: unknown): unknown {
  if (!isObject(data) || !Object.hasOwn(data, 'checksum')) return data;
  const copy = { ...data };
  delete copy.checksum;
  return copy;
}

/**
 * RFC 8785 text of `data` (its `checksum` key left out), or undefined where RFC 8785 has none:
 * a number that is not finite (`1e400` parses to Infinity) or a string with a lone surrogate
 * ("MUST cause a compliant JCS implementation to terminate with an appropriate error").
 */
export function jcsText(data: unknown): string | undefined {
  try {
    return canonicalize(withoutChecksum(data));
  } catch {
    return undefined;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * What a receiver in `auto` mode with a raw body must answer to `body`, signed for any of
 * `businessIds`:
 * - `malformed_payload` (400): not UTF-8, not JSON, not an object; no non-empty string `event`, no
 *   `data`, no `checksum` of 64 hex digits (either case); a duplicate key anywhere; nesting deeper
 *   than 64 levels; or, once the lexical form does not match, a `data` RFC 8785 cannot encode;
 * - `accepted` (200): the HMAC of `event|lexical(data)` matches, else that of `event|jcs(data)`;
 * - `invalid_checksum` (401): neither matches, for any business id.
 */
export function referenceVerdict(body: Uint8Array, businessIds: readonly string[]): Verdict {
  let text: string;
  let envelope: unknown;
  try {
    text = utf8.decode(body);
    envelope = JSON.parse(text);
  } catch {
    return 'malformed_payload';
  }
  if (!isObject(envelope)) return 'malformed_payload';
  const { event, data, checksum } = envelope;
  if (typeof event !== 'string' || event.length === 0 || data === undefined) return 'malformed_payload';
  if (typeof checksum !== 'string' || !/^[0-9a-fA-F]{64}$/.test(checksum)) return 'malformed_payload';
  let tree: JsonNode;
  try {
    tree = readTree(text, { strict: true });
  } catch (error) {
    if (error instanceof TreeError) return 'malformed_payload';
    throw error;
  }
  const dataNode = tree.kind === 'object' ? tree.members.find((m) => m.key === 'data')?.value : undefined;
  if (dataNode === undefined) throw new Error('the reader lost "data"');
  const expected = checksum.toLowerCase();
  const lexical = `${event}|${lexicalText(dataNode, true)}`;
  if (businessIds.some((id) => hmacHex(id, lexical) === expected)) return 'accepted';
  const jcs = jcsText(data);
  if (jcs === undefined) return 'malformed_payload';
  if (businessIds.some((id) => hmacHex(id, `${event}|${jcs}`) === expected)) return 'accepted';
  return 'invalid_checksum';
}
