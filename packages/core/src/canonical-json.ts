import { compareKeys, MAX_NESTING, OMITTED_DATA_KEY, sortKeys, tooDeep } from './canonical-rules.js';
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
 * `Infinity`, a `bigint`, a string with a lone surrogate, a circular reference, and for nesting of
 * objects and arrays deeper than 1,000 levels (never a stack overflow).
 *
 * @example
 * ```ts
 * canonicalJson({ b: [1, 2.50, 'é'], a: { d: null, c: true } });
 * // '{"a":{"c":true,"d":null},"b":[1,2.5,"é"]}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  const fast = fastCanonicalJson(value);
  if (fast !== undefined) return fast;
  let out: string | undefined;
  try {
    out = encode(value, new Set(), 0);
  } catch (cause) {
    // The depth limit keeps the encoder well inside the stack; a caller already deep in its own
    // stack (or an output past the engine's string limit) still gets a PayhookError.
    if (cause instanceof RangeError) {
      throw new PayhookError(
        'malformed_payload',
        `canonicalJson cannot encode the value: ${cause.message}.`,
        {
          cause,
        },
      );
    }
    throw cause;
  }
  if (out === undefined) {
    throw new PayhookError(
      'malformed_payload',
      `canonicalJson cannot encode a value of type ${typeof value}.`,
    );
  }
  return out;
}

/** Whether `data` carries the top-level key its checksum leaves out ({@link OMITTED_DATA_KEY}). */
export function hasOmittedKey(data: unknown): boolean {
  return (
    data !== null && typeof data === 'object' && !Array.isArray(data) && Object.hasOwn(data, OMITTED_DATA_KEY)
  );
}

/**
 * {@link canonicalJson} of `data` as its checksum signs it: any top-level `checksum` key left out
 * (the wire format's rule, {@link OMITTED_DATA_KEY}).
 */
export function canonicalSignedData(data: unknown): string {
  if (!hasOmittedKey(data)) return canonicalJson(data);
  const fast = fastCanonicalJson(data, OMITTED_DATA_KEY);
  if (fast !== undefined) return fast;
  const copy: Record<string, unknown> = { ...(data as Record<string, unknown>) };
  delete copy[OMITTED_DATA_KEY];
  return canonicalJson(copy);
}

/**
 * RFC 8785 text of plain JSON data through the native `JSON.stringify`, or `undefined` when the
 * value holds anything this path does not take (then {@link canonicalJson}'s general encoder
 * decides, and may throw). A value whose objects already list their keys in canonical order (every
 * payload parsed from a JCS body) is stringified as it is; otherwise the objects out of order are
 * copied with their keys inserted in canonical order, which `JSON.stringify` then keeps.
 * `omitKey` leaves one key of a top-level object out.
 */
function fastCanonicalJson(value: unknown, omitKey?: string): string | undefined {
  const form = canonicalForm(value, 0, omitKey);
  return form === DECLINED ? undefined : JSON.stringify(form);
}

const MAX_FAST_DEPTH = 256;

/** What {@link canonicalForm} answers for a value the fast path leaves to the general encoder. */
const DECLINED: unique symbol = Symbol('declined');

// Keys that an assignment to a fresh object would not create as plain own data properties
// (`__proto__` sets the prototype; the others may be read-only on a frozen Object.prototype).
const PROTOTYPE_KEYS = new Set(Object.getOwnPropertyNames(Object.prototype));

/**
 * `value` itself when `JSON.stringify(value)` is already its RFC 8785 form (plain data only, every
 * object's own keys in ascending UTF-16 order, every number finite, every string well formed); a
 * copy whose objects insert their keys in that order when only the order is off (or `omitKey` is
 * to be left out); `DECLINED` for anything else. Objects in order are reused, not copied, so a
 * value in canonical order costs one read-only walk.
 */
function canonicalForm(value: unknown, depth: number, omitKey?: string): unknown {
  switch (typeof value) {
    case 'string':
      return value.isWellFormed() ? value : DECLINED;
    case 'number':
      return Number.isFinite(value) ? value : DECLINED;
    case 'boolean':
      return value;
    case 'object': {
      if (value === null) return null;
      if (depth > MAX_FAST_DEPTH) return DECLINED;
      if (Array.isArray(value)) {
        let copy: unknown[] | undefined;
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          // undefined, functions and symbols become null in arrays: left to the general encoder.
          const form = canonicalForm(item, depth + 1);
          if (form === DECLINED) return DECLINED;
          if (form !== item && copy === undefined) copy = value.slice(0, i);
          if (copy !== undefined) copy.push(form);
        }
        return copy ?? value;
      }
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return DECLINED;
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return DECLINED;
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record);
      let sorted = true;
      for (let i = 1; i < keys.length; i++) {
        // Keys are unique, so a strict comparison is a complete check; the empty key sorts first.
        if (compareKeys(keys[i - 1] as string, keys[i] as string) >= 0) {
          sorted = false;
          break;
        }
      }
      // Out of order: a copy, its keys inserted in canonical order. In order: the object itself,
      // unless a member changes.
      if (!sorted) sortKeys(keys);
      let copy: Record<string, unknown> | undefined;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        if (!key.isWellFormed()) return DECLINED;
        const omit = key === omitKey;
        const item = omit ? undefined : record[key];
        const form = omit ? undefined : canonicalForm(item, depth + 1);
        if (form === DECLINED) return DECLINED;
        if (copy === undefined && (omit || form !== item || !sorted)) {
          copy = {};
          for (let j = 0; j < i; j++) {
            if (!assign(copy, keys[j] as string, record[keys[j] as string])) return DECLINED;
          }
        }
        if (copy !== undefined && !omit && !assign(copy, key, form)) return DECLINED;
      }
      return copy ?? value;
    }
    default:
      // undefined, function, symbol, bigint
      return DECLINED;
  }
}

/**
 * Adds a member to a copy, in order. False for keys a plain object would not enumerate in
 * insertion order (integer-like keys come first, in numeric order) or not take as plain data.
 */
function assign(copy: Record<string, unknown>, key: string, value: unknown): boolean {
  const first = key.charCodeAt(0);
  if ((first >= 0x30 && first <= 0x39) || PROTOTYPE_KEYS.has(key)) return false;
  copy[key] = value;
  return true;
}

/** The general encoder, for values the fast path declines. Mirrors `canonicalize`'s semantics. */
function encode(value: unknown, seen: Set<object>, depth: number): string | undefined {
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
      if (depth >= MAX_NESTING) throw tooDeep('canonicalJson: the value', MAX_NESTING);
      if (seen.has(value)) {
        throw new PayhookError('malformed_payload', 'canonicalJson: the value holds a circular reference.');
      }
      seen.add(value);
      let out: string;
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
        // A level of its own, so that a chain of toJSON results that never ends stops at the limit.
        const replaced = encode((value as { toJSON: () => unknown }).toJSON(), seen, depth + 1);
        seen.delete(value);
        return replaced;
      }
      if (Array.isArray(value)) {
        out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += encode(value[i], seen, depth + 1) ?? 'null';
        }
        out += ']';
      } else {
        const keys = sortKeys(Object.keys(value));
        out = '{';
        let first = true;
        for (const key of keys) {
          const encoded = encode((value as Record<string, unknown>)[key], seen, depth + 1);
          if (encoded === undefined) continue;
          if (!first) out += ',';
          out += `${encode(key, seen, depth)}:${encoded}`;
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
