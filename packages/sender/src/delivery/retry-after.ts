// A receiver's Retry-After (RFC 9110, section 10.2.3), read on 429 and 503 answers only: pure
// functions, so the client keeps what was said and the recorder turns it into a time on the
// worker's clock.

/** The statuses whose `Retry-After` the worker honours (429 Too Many Requests, 503 Service Unavailable). */
export const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/** What a receiver asked for: a delay from its response, or a time. */
export type RetryAfter = { seconds: number } | { date: Date };

/**
 * The largest delay kept: RFC 9110 has a delta-seconds too large to represent read as 2^31 s. Any
 * delay past the delivery's 48 hours is capped at its deadline anyway.
 */
const MAX_SECONDS = 2 ** 31;

const DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const LONG_DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const TIME = '(\\d\\d):(\\d\\d):(\\d\\d)';
const MONTH = `(${MONTHS.join('|')})`;

// The three forms of HTTP-date a recipient must accept (RFC 9110, section 5.6.7), exactly: no
// `Date.parse`, which also reads "120" as the year 120 and much else as some date.
/** IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = new RegExp(`^(?:${DAYS.join('|')}), (\\d\\d) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** The obsolete RFC 850 form: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(`^(?:${LONG_DAYS.join('|')}), (\\d\\d)-${MONTH}-(\\d\\d) ${TIME} GMT$`);
/** The obsolete asctime form: `Sun Nov  6 08:49:37 1994`. */
const ASCTIME_DATE = new RegExp(`^(?:${DAYS.join('|')}) ${MONTH} ([\\d ]\\d) ${TIME} (\\d{4})$`);

/** The time of a date's fields, or `null` when a field is out of range (31 Feb, 25:00). */
function utc(year: number, month: string, day: number, h: string, m: string, s: string): Date | null {
  const monthIndex = MONTHS.indexOf(month);
  const [hour, minute, second] = [Number(h), Number(m), Number(s)];
  // A leap second (60) is allowed by the grammar: read as the second before it.
  if (hour > 23 || minute > 59 || second > 60) return null;
  const time = Date.UTC(year, monthIndex, day, hour, minute, Math.min(second, 59));
  const date = new Date(time);
  if (date.getUTCDate() !== day || date.getUTCMonth() !== monthIndex) return null;
  return date;
}

/**
 * Reads an HTTP-date in any of its three forms; `null` for anything else. A two-digit RFC 850
 * year more than 50 years after `now`'s is read as the last such year in the past (the RFC's
 * rule).
 *
 * @example
 * ```ts
 * parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT'); // 1994-11-06T08:49:37.000Z
 * parseHttpDate('Sun Nov  6 08:49:37 1994');      // the same time
 * parseHttpDate('120');                            // null
 * ```
 */
export function parseHttpDate(text: string, now: Date = new Date()): Date | null {
  let match = IMF_FIXDATE.exec(text);
  if (match) {
    const [, day, month, year, h, m, s] = match as unknown as string[];
    return utc(Number(year), month as string, Number(day), h as string, m as string, s as string);
  }
  match = RFC850_DATE.exec(text);
  if (match) {
    const [, day, month, yy, h, m, s] = match as unknown as string[];
    const current = now.getUTCFullYear();
    let year = current - (current % 100) + Number(yy);
    if (year > current + 50) year -= 100;
    return utc(year, month as string, Number(day), h as string, m as string, s as string);
  }
  match = ASCTIME_DATE.exec(text);
  if (match) {
    const [, month, day, h, m, s, year] = match as unknown as string[];
    return utc(Number(year), month as string, Number(day), h as string, m as string, s as string);
  }
  return null;
}

/**
 * Reads a `Retry-After` header: delta-seconds (digits only) or an HTTP-date. Garbage, negative
 * and fractional numbers, and several differing values are ignored (`null`): the retry schedule
 * alone then decides. Surrounding spaces and tabs are allowed.
 *
 * @param now - the reference of an RFC 850 date's two-digit year (default: the current time).
 *
 * @example
 * ```ts
 * parseRetryAfter('120');                           // { seconds: 120 }
 * parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT'); // { date: 2015-10-21T07:28:00.000Z }
 * parseRetryAfter('-5');                            // null
 * ```
 */
export function parseRetryAfter(
  value: string | readonly string[] | undefined,
  now: Date = new Date(),
): RetryAfter | null {
  if (value === undefined) return null;
  let text: string;
  if (typeof value === 'string') text = value;
  else {
    // A field given twice is read only when both say the same.
    const [first, ...rest] = value;
    if (first === undefined || rest.some((v) => v.trim() !== first.trim())) return null;
    text = first;
  }
  text = text.replace(/^[ \t]+|[ \t]+$/g, '');
  if (/^\d+$/.test(text)) return { seconds: Math.min(Number(text), MAX_SECONDS) };
  const date = parseHttpDate(text, now);
  return date ? { date } : null;
}

/**
 * The earliest time the receiver asked to be tried again: `receivedAt` (when its answer came, on
 * the worker's clock) plus the delay, or the date it gave.
 *
 * @example
 * ```ts
 * retryAfterTime({ seconds: 120 }, new Date('2026-01-01T00:00:00Z')); // 2026-01-01T00:02:00.000Z
 * ```
 */
export function retryAfterTime(retryAfter: RetryAfter, receivedAt: Date): Date {
  return 'seconds' in retryAfter
    ? new Date(receivedAt.getTime() + retryAfter.seconds * 1000)
    : retryAfter.date;
}

/**
 * How a Retry-After reads in an attempt's message.
 *
 * @example
 * ```ts
 * describeRetryAfter({ seconds: 120 }); // 'Retry-After: 120 s'
 * ```
 */
export function describeRetryAfter(retryAfter: RetryAfter): string {
  return 'seconds' in retryAfter
    ? `Retry-After: ${retryAfter.seconds} s`
    : `Retry-After: ${retryAfter.date.toISOString()}`;
}
