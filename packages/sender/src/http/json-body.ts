import { ApiError } from '../errors.js';

/** The deepest nesting of objects and arrays a request body may have (docs/decisions.md, "Sender input"). */
export const MAX_BODY_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const MINUS = 0x2d;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/** What {@link inspectJson} finds in a JSON text. */
export type JsonInspection =
  | { ok: true }
  | { ok: false; problem: 'too_deep' }
  | { ok: false; problem: 'inexact_number'; token: string };

const OK: JsonInspection = { ok: true };
const TOO_DEEP: JsonInspection = { ok: false, problem: 'too_deep' };

/**
 * One pass over JSON text that `JSON.parse` has accepted (V8's parser does not recurse, so it is
 * safe on any depth; everything after it, stringify and hashing included, does): nesting deeper
 * than `maxDepth`, or the first number token whose value `JSON.parse` changed (see
 * {@link numberChanged}). Strings are skipped with `indexOf`; only number tokens longer than 15
 * characters or with an exponent are looked at closely, so a usual body costs one quick scan.
 */
export function inspectJson(text: string, maxDepth: number = MAX_BODY_DEPTH): JsonInspection {
  const n = text.length;
  let depth = 0;
  let inexact: string | undefined;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return TOO_DEEP;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    } else if (c === MINUS || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      let exponent = false;
      for (; end < n; end++) {
        const d = text.charCodeAt(end);
        if (d === LOWER_E || d === UPPER_E) exponent = true;
        else if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === MINUS || d === 0x2b)) break;
      }
      // Up to 15 significant digits and no exponent, a decimal always reads back as itself.
      if (inexact === undefined && (exponent || end - i > 15)) {
        const token = text.slice(i, end);
        if (numberChanged(token)) inexact = token;
      }
      i = end - 1;
    }
  }
  return inexact === undefined ? OK : { ok: false, problem: 'inexact_number', token: inexact };
}

/** The index of the closing quote of the string token that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let end = text.indexOf('"', start + 1);
  for (;;) {
    if (end === -1) return text.length; // not JSON that parsed; nothing more to read
    let backslashes = 0;
    while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end;
    end = text.indexOf('"', end + 1);
  }
}

/**
 * Whether `JSON.parse` changes the value of a JSON number token in a way the API refuses to pass
 * on silently: a value out of the double range (`1e400` becomes Infinity, `1e-400` becomes 0),
 * a whole number it cannot hold exactly (`9007199254740993` becomes `...992`, `1e23` is not
 * 10^23), or a fraction that comes out whole (`100000.00000000000001` becomes 100000). Other
 * fractions are rounded to the nearest double, as JSON numbers always are.
 */
export function numberChanged(token: string): boolean {
  const value = Number(token);
  if (!Number.isFinite(value)) return true;
  const match = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(token);
  if (!match) return true;
  const fraction = match[2] ?? '';
  let exponent = Number(match[3] ?? '0') - fraction.length;
  const digits = `${match[1]}${fraction}`.replace(/^0+/, '');
  if (digits === '') return false; // zero, however it is written
  const significant = digits.replace(/0+$/, '');
  exponent += digits.length - significant.length;
  // A fraction as written: changed only if it came out whole (0 included).
  if (exponent < 0) return Number.isInteger(value);
  if (significant.length + exponent > 309) return true;
  return `${significant}${'0'.repeat(exponent)}` !== BigInt(Math.abs(value)).toString();
}

/** The dotted path of the first number in `value` equal to `target` (the field to name in a 422). */
export function pathOfNumber(value: unknown, target: number, path = ''): string | undefined {
  if (typeof value === 'number') return value === target ? path : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    const found = pathOfNumber(item, target, path === '' ? key : `${path}.${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The answer to a body that `inspectJson` refused: 400 for nesting past the limit, 422 naming the
 * field whose number would change when read.
 */
export function inspectionError(inspection: JsonInspection & { ok: false }, value: unknown): ApiError {
  if (inspection.problem === 'too_deep') {
    return new ApiError(
      'invalid_request',
      `The body nests objects and arrays deeper than ${MAX_BODY_DEPTH} levels.`,
    );
  }
  const field = pathOfNumber(value, Number(inspection.token)) || 'body';
  return new ApiError(
    'validation_failed',
    `The number ${inspection.token.slice(0, 40)} cannot be held exactly; send whole numbers up to 2^53 - 1 (9007199254740991), or the value as a string.`,
    {
      details: [
        {
          field,
          message: 'is a number that cannot be held exactly (an integer is at most 9007199254740991)',
        },
      ],
    },
  );
}
