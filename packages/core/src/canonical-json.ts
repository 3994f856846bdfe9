import { PayhookError } from './errors.js';

/**
 * RFC 8785 (JSON Canonicalization Scheme) encoding of a JSON value: object keys sorted by UTF-16
 * code units at every depth, no whitespace, numbers and strings in their ECMAScript form.
 *
 * Byte-identical to the `canonicalize` package (the sender's reference encoder), and faster: a
 * value whose objects already list their keys in canonical order (every payload parsed from a
 * JCS-encoded body) is handed to the native `JSON.stringify` after one read-only walk.
 *
 * Throws a `PayhookError` with code `malformed_payload` for what JSON cannot carry: `NaN`,
 * `Infinity`, a `bigint`, a string with a lone surrogate, a circular reference.
 *
 * @example
 * ```ts
 * canonicalJson({ b: [1, 2.50, 'é'], a: { d: null, c: true } });
 * // '{"a":{"c":true,"d":null},"b":[1,2.5,"é"]}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  if (isInCanonicalOrder(value, 0)) {
    return JSON.stringify(value);
  }
  const out = encode(value, new Set());
  if (out === undefined) {
    throw new PayhookError(
      'malformed_payload',
      `canonicalJson cannot encode a value of type ${typeof value}.`,
    );
  }
  return out;
}

/**
 * The same as {@link canonicalJson} for an object, with one top-level key left out: the wire format
 * signs `data` without any `checksum` key it may carry.
 */
export function canonicalJsonWithout(value: unknown, omitKey: string): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, omitKey)) {
    return canonicalJson(value);
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  delete copy[omitKey];
  return canonicalJson(copy);
}

const MAX_FAST_DEPTH = 256;

/**
 * True when `JSON.stringify(value)` is already the RFC 8785 form: plain data only, every object's own
 * keys in ascending UTF-16 order, every number finite, every string well formed. Read-only and
 * allocation-light (one `Object.keys` per object), so checking costs far less than encoding.
 */
function isInCanonicalOrder(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      return value.isWellFormed();
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    case 'object': {
      if (value === null) return true;
      if (depth > MAX_FAST_DEPTH) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          // undefined, functions and symbols become null in arrays: leave that to the slow path.
          if (!isInCanonicalOrder(item, depth + 1)) return false;
        }
        return true;
      }
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      const keys = Object.keys(value);
      let previous = '';
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        // Keys are unique, so a strict comparison is a complete check; the empty key sorts first.
        if (i > 0 && !(previous < key)) return false;
        if (!key.isWellFormed()) return false;
        if (!isInCanonicalOrder((value as Record<string, unknown>)[key], depth + 1)) return false;
        previous = key;
      }
      return true;
    }
    default:
      // undefined, function, symbol, bigint
      return false;
  }
}

/** The general encoder, for values the fast path declines. Mirrors `canonicalize`'s semantics. */
function encode(value: unknown, seen: Set<object>): string | undefined {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) {
        throw new PayhookError(
          'malformed_payload',
          'canonicalJson: a string holds a lone surrogate, which RFC 8785 does not allow.',
        );
      }
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) {
        throw new PayhookError('malformed_payload', `canonicalJson: ${value} is not a JSON number.`);
      }
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new PayhookError(
        'malformed_payload',
        'canonicalJson: a bigint has no JSON form; convert it to a number or string first.',
      );
    case 'object': {
      if (value === null) return 'null';
      if (seen.has(value)) {
        throw new PayhookError('malformed_payload', 'canonicalJson: the value holds a circular reference.');
      }
      seen.add(value);
      let out: string;
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
        const replaced = encode((value as { toJSON: () => unknown }).toJSON(), seen);
        seen.delete(value);
        return replaced;
      }
      if (Array.isArray(value)) {
        out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += encode(value[i], seen) ?? 'null';
        }
        out += ']';
      } else {
        const keys = Object.keys(value).sort();
        out = '{';
        let first = true;
        for (const key of keys) {
          const encoded = encode((value as Record<string, unknown>)[key], seen);
          if (encoded === undefined) continue;
          if (!first) out += ',';
          out += `${encode(key, seen)}:${encoded}`;
          first = false;
        }
        out += '}';
      }
      seen.delete(value);
      return out;
    }
    default:
      // undefined, functions and symbols: left out of objects, null in arrays (as JSON.stringify does).
      return undefined;
  }
}
