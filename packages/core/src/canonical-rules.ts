import { PayhookError } from './errors.js';

/**
 * The key of `data` that the checksum leaves out (docs/service-interface.md, "The wire format"):
 * `data` is signed without a top-level `checksum` member, by both canonicalizers and the encoder.
 */
export const OMITTED_DATA_KEY = 'checksum';

/**
 * RFC 8785's key order (section 3.2.3): by UTF-16 code units, a key before any longer key it
 * begins. JavaScript's `<` on strings compares exactly that.
 */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorts keys in {@link compareKeys} order: the default sort compares UTF-16 code units too, natively. */
export function sortKeys(keys: string[]): string[] {
  return keys.sort();
}

/**
 * A 32-bit integer that orders keys as {@link compareKeys} does by their first two code units,
 * a missing unit counted as 0: keys whose prefixes differ compare as their prefixes do (a missing
 * unit sorts first, and 0 is never above another unit), and only keys with equal prefixes need
 * comparing further.
 */
export function prefixOfUnits(first: number, second: number): number {
  // first * 2^16 + second spans 0 to 2^32 - 1; flipping the sign bit keeps that order in a
  // signed 32-bit integer.
  return ((first << 16) | second) ^ 0x80000000;
}

/** The default `maxDepth` of a raw body: 64 levels of objects and arrays, the envelope counting as one. */
export const DEFAULT_MAX_DEPTH = 64;

/**
 * The deepest nesting either canonicalizer reads, whatever it is asked: both recurse once per
 * level, and 1,000 levels stay far inside the default stack (it runs out past about 3,000), so
 * deeper input ends in a `PayhookError`, never a stack overflow.
 */
export const MAX_NESTING = 1000;

/** `maxDepth` capped at {@link MAX_NESTING}; NaN (which would make every check false) takes the cap. */
export function depthLimit(maxDepth: number): number {
  return Number.isNaN(maxDepth) ? MAX_NESTING : Math.min(maxDepth, MAX_NESTING);
}

/** The refusal of input nested deeper than `limit`; `subject` names it ("The body"). */
export function tooDeep(subject: string, limit: number): PayhookError {
  return new PayhookError(
    'malformed_payload',
    `${subject} nests objects and arrays deeper than ${limit} levels.`,
  );
}

/** The refusal of an object that has `key` twice. */
export function duplicateKey(key: string): PayhookError {
  return new PayhookError(
    'malformed_payload',
    `The body has the key ${JSON.stringify(key)} twice in one object; a payload with duplicate keys is refused because different parsers would read different values.`,
  );
}
