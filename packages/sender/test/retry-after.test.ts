import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AttemptErrorCode } from '../src/delivery/attempt-outcome.js';
import { describeRetryAfter } from '../src/delivery/retry-after.js';
import {
  ATTEMPT_OUTCOMES,
  DELIVERY_WINDOW_MS,
  nextAttemptAt,
  outcomeLabel,
  parseHttpDate,
  parseRetryAfter,
  retryAfterTime,
} from '../src/index.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const S = 1000;
const H = 3600 * S;
const at = (ms: number) => new Date(t0.getTime() + ms);

describe('parseRetryAfter', () => {
  it.each([
    ['120', { seconds: 120 }],
    ['0', { seconds: 0 }],
    [' 7\t', { seconds: 7 }],
    ['007', { seconds: 7 }],
    // Too large to represent: read as 2^31 s (RFC 9110), capped at the deadline later anyway.
    ['99999999999999999999999', { seconds: 2 ** 31 }],
  ])('reads delta-seconds %j', (value, expected) => {
    expect(parseRetryAfter(value)).toEqual(expected);
  });

  it('reads the three HTTP-date forms as the same instant', () => {
    const expected = { date: new Date('1994-11-06T08:49:37.000Z') };
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT')).toEqual(expected);
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', t0)).toEqual(expected);
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994')).toEqual(expected);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:28:00 GMT')).toEqual({
      date: new Date('2026-10-21T07:28:00.000Z'),
    });
  });

  it('reads a two-digit RFC 850 year as at most 50 years ahead of the clock', () => {
    expect(parseHttpDate('Thursday, 01-Jan-70 00:00:00 GMT', t0)?.toISOString()).toBe(
      '2070-01-01T00:00:00.000Z',
    );
    expect(parseHttpDate('Monday, 01-Jan-80 00:00:00 GMT', t0)?.toISOString()).toBe(
      '1980-01-01T00:00:00.000Z',
    );
  });

  it.each([
    '-5',
    '-0',
    '1.5',
    '1e3',
    '+10',
    '',
    '   ',
    'soon',
    '120 seconds',
    '0x10',
    // Date.parse reads all of these as some date; none is an HTTP-date.
    '2026-01-01T00:00:00Z',
    'Wed, 21 Oct 2026 07:28:00',
    'Wed, 21 Oct 2026 07:28:00 UTC',
    'wed, 21 oct 2026 07:28:00 GMT',
    'Wed, 31 Feb 2026 07:28:00 GMT',
    'Wed, 21 Oct 2026 25:28:00 GMT',
    'Wed,  21 Oct 2026 07:28:00 GMT',
    'Sun Nov 6 08:49:37 1994',
  ])('ignores %j', (value) => {
    expect(parseRetryAfter(value)).toBeNull();
  });

  it('reads a field given twice only when both say the same', () => {
    expect(parseRetryAfter(['30', '30'])).toEqual({ seconds: 30 });
    expect(parseRetryAfter(['30', '60'])).toBeNull();
    expect(parseRetryAfter([])).toBeNull();
    expect(parseRetryAfter(undefined)).toBeNull();
  });

  it('reads any digits as the number they spell, and nothing else as a delay', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const parsed = parseRetryAfter(text);
        if (parsed !== null && 'seconds' in parsed) {
          expect(text.trim()).toMatch(/^\d+$/);
          expect(parsed.seconds).toBe(Math.min(Number(text.trim()), 2 ** 31));
        }
      }),
    );
  });

  it('turns a delay into a time from the answer, and says it in the attempt message', () => {
    expect(retryAfterTime({ seconds: 120 }, t0)).toEqual(at(120 * S));
    const date = new Date('2026-01-01T01:00:00.000Z');
    expect(retryAfterTime({ date }, t0)).toBe(date);
    expect(describeRetryAfter({ seconds: 120 })).toBe('Retry-After: 120 s');
    expect(describeRetryAfter({ date })).toBe('Retry-After: 2026-01-01T01:00:00.000Z');
  });
});

describe('nextAttemptAt with a Retry-After', () => {
  const first = { attempts: 1, firstAttemptAt: t0, lastAttemptAt: t0 };

  it('waits for the later of the schedule and the receiver', () => {
    // The schedule says 5 s (jitter factor 1); the receiver 120 s.
    expect(nextAttemptAt({ ...first, notBefore: at(120 * S) }, () => 0.5)).toEqual(at(120 * S));
    // A Retry-After sooner than the schedule changes nothing.
    expect(nextAttemptAt({ ...first, notBefore: at(2 * S) }, () => 0.5)).toEqual(at(5 * S));
    // Nor does one in the past, or none.
    expect(nextAttemptAt({ ...first, notBefore: at(-H) }, () => 0.5)).toEqual(at(5 * S));
    expect(nextAttemptAt({ ...first, notBefore: null }, () => 0.5)).toEqual(at(5 * S));
    expect(nextAttemptAt({ ...first, notBefore: new Date(Number.NaN) }, () => 0.5)).toEqual(at(5 * S));
  });

  it('caps a Retry-After past the deadline at the deadline: the last attempt is there', () => {
    const deadline = at(DELIVERY_WINDOW_MS);
    expect(nextAttemptAt({ ...first, notBefore: at(72 * H) }, () => 0.5)).toEqual(deadline);
    const late = { attempts: 9, firstAttemptAt: t0, lastAttemptAt: at(40 * H) };
    expect(nextAttemptAt({ ...late, notBefore: at(49 * H) }, () => 0.5)).toEqual(deadline);
    // The attempt at the deadline was the last, whatever the receiver asks.
    const last = { attempts: 11, firstAttemptAt: t0, lastAttemptAt: deadline };
    expect(nextAttemptAt({ ...last, notBefore: at(49 * H) }, () => 0.5)).toBeNull();
  });

  it('never goes before the schedule or past the deadline, whatever the receiver asks', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 0, max: DELIVERY_WINDOW_MS }),
        fc.integer({ min: -DELIVERY_WINDOW_MS, max: 4 * DELIVERY_WINDOW_MS }),
        (attempts, last, asked) => {
          const attempt = { attempts, firstAttemptAt: t0, lastAttemptAt: at(last) };
          const scheduled = nextAttemptAt(attempt, () => 0.5);
          const next = nextAttemptAt({ ...attempt, notBefore: at(asked) }, () => 0.5);
          if (scheduled === null) expect(next).toBeNull();
          else {
            const end = t0.getTime() + DELIVERY_WINDOW_MS;
            expect(next?.getTime()).toBe(Math.min(Math.max(scheduled.getTime(), t0.getTime() + asked), end));
          }
        },
      ),
    );
  });
});

describe('outcomeLabel', () => {
  const failed = (code: AttemptErrorCode, statusCode: number | null = null) => ({
    ok: false,
    statusCode,
    error: { code, message: '' },
  });

  it('gives every error code a label of the fixed set', () => {
    const labels: Record<AttemptErrorCode, string> = {
      invalid_url: 'invalid_url',
      unsupported_scheme: 'invalid_url',
      credentials_in_url: 'invalid_url',
      unresolvable_host: 'dns',
      non_public_address: 'refused_address',
      connect_timeout: 'connect_timeout',
      timeout: 'timeout',
      connection_refused: 'connection_refused',
      tls_error: 'tls',
      network_error: 'other',
      redirect: 'redirect',
      unexpected_status: 'other',
    };
    for (const [code, label] of Object.entries(labels)) {
      expect(outcomeLabel(failed(code as AttemptErrorCode))).toBe(label);
      expect(ATTEMPT_OUTCOMES).toContain(label);
    }
    // A timeout while the body was read keeps its status, and is a timeout.
    expect(outcomeLabel(failed('timeout', 503))).toBe('timeout');
  });

  it.each([
    [200, 'delivered'],
    [201, 'http_2xx'],
    [204, 'http_2xx'],
    [400, 'http_4xx'],
    [401, 'http_4xx'],
    [429, 'http_429'],
    [500, 'http_5xx'],
    [503, 'http_5xx'],
    [599, 'http_5xx'],
    [600, 'other'],
  ])('labels an answer of %i %s', (status, label) => {
    const outcome =
      status === 200 ? { ok: true, statusCode: 200, error: null } : failed('unexpected_status', status);
    expect(outcomeLabel(outcome)).toBe(label);
  });
});
