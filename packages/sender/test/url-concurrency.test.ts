import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { URL_CONCURRENCY_DEFAULTS, UrlConcurrency } from '../src/delivery/url-concurrency.js';

const FAST = 'https://fast.example/hooks';
const SLOW = 'https://slow.example/hooks';

/** A fake clock, moved by hand. */
function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/**
 * Drives `url` as the worker does: `limit` attempts go out at once, each answers after
 * `latencyMs` with `ok`; `rounds` times over. Saturated: the URL always has more due.
 */
function rounds(
  c: UrlConcurrency,
  time: ReturnType<typeof clock>,
  url: string,
  n: number,
  answer: { ok: boolean; latencyMs: number; stalledMs?: number },
) {
  for (let i = 0; i < n; i++) {
    const limit = c.limit(url);
    const sentAt = time.now();
    time.advance(answer.latencyMs);
    for (let k = 0; k < limit; k++)
      c.answered(url, { ...answer, sentAt, saturated: true, endpointId: 'ep_1' });
  }
}

describe('UrlConcurrency', () => {
  it('gives a fast URL with more due room, one per round of answers, up to the maximum', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    expect(c.limit(FAST)).toBe(4);
    rounds(c, time, FAST, 1, { ok: true, latencyMs: 2 });
    expect(c.limit(FAST)).toBe(5);
    rounds(c, time, FAST, 10, { ok: true, latencyMs: 2 });
    expect(c.limit(FAST)).toBe(15);
    rounds(c, time, FAST, 100, { ok: true, latencyMs: 2 });
    expect(c.limit(FAST)).toBe(URL_CONCURRENCY_DEFAULTS.max);
  });

  it('does not grow a URL that has room to spare', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    for (let i = 0; i < 1000; i++)
      c.answered(FAST, { ok: true, latencyMs: 1, sentAt: time.now(), saturated: false });
    expect(c.limit(FAST)).toBe(4);
  });

  it('halves a slow URL once per round, down to the minimum, and keeps it there', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    rounds(c, time, SLOW, 8, { ok: true, latencyMs: 2 });
    expect(c.limit(SLOW)).toBe(12);
    // Twelve attempts in flight answer after 5 s: one cut (to 6), not twelve.
    rounds(c, time, SLOW, 1, { ok: true, latencyMs: 5000 });
    expect(c.limit(SLOW)).toBe(6);
    rounds(c, time, SLOW, 1, { ok: true, latencyMs: 5000 });
    expect(c.limit(SLOW)).toBe(3);
    rounds(c, time, SLOW, 10, { ok: true, latencyMs: 5000 });
    expect(c.limit(SLOW)).toBe(URL_CONCURRENCY_DEFAULTS.min);
  });

  it('halves a URL that fails fast as one that is slow', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    rounds(c, time, SLOW, 1, { ok: false, latencyMs: 1 });
    expect(c.limit(SLOW)).toBe(2);
    rounds(c, time, SLOW, 1, { ok: false, latencyMs: 1 });
    expect(c.limit(SLOW)).toBe(1);
  });

  it('stops growing a URL whose latency climbs past twice its best (it queues what it gets)', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    rounds(c, time, FAST, 20, { ok: true, latencyMs: 5 });
    const before = c.limit(FAST);
    // 100 ms answers, below the slow threshold: no cut, but no growth once the average has risen.
    rounds(c, time, FAST, 10, { ok: true, latencyMs: 100 });
    const during = c.limit(FAST);
    rounds(c, time, FAST, 50, { ok: true, latencyMs: 100 });
    expect(c.limit(FAST)).toBe(during);
    expect(during).toBeGreaterThanOrEqual(before);
    expect(during).toBeLessThan(before + 3);
  });

  it("learns from a URL's own time: answers read late because the sender's thread was busy do not stop its growth or cut it", () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    rounds(c, time, FAST, 20, { ok: true, latencyMs: 5 });
    const before = c.limit(FAST);
    // The same 100 ms answers as above, 95 ms of which the sender's own loop ran late: it grows on.
    rounds(c, time, FAST, 30, { ok: true, latencyMs: 100, stalledMs: 95 });
    expect(c.limit(FAST)).toBeGreaterThan(before + 3);
    expect(c.snapshot()[0]?.latencyMs).toBeLessThan(10);
    // An answer past slowMs that the thread caused (a 1.5 s statement of PGlite) cuts nothing.
    const grown = c.limit(FAST);
    rounds(c, time, FAST, 1, { ok: true, latencyMs: 1500, stalledMs: 1495 });
    expect(c.limit(FAST)).toBeGreaterThanOrEqual(grown);
    // One that the URL took does.
    rounds(c, time, FAST, 1, { ok: true, latencyMs: 1500, stalledMs: 10 });
    expect(c.limit(FAST)).toBeLessThan(grown);
  });

  it('keeps each URL apart: a slow one shrinks while a fast one grows', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    for (let i = 0; i < 20; i++) {
      rounds(c, time, FAST, 1, { ok: true, latencyMs: 2 });
      rounds(c, time, SLOW, 1, { ok: false, latencyMs: 15_000 });
    }
    expect(c.limit(FAST)).toBeGreaterThan(10);
    expect(c.limit(SLOW)).toBe(1);
    expect(c.limitOfEndpoint('ep_1')).toBeDefined();
    const states = new Map(c.snapshot().map((s) => [s.url, s]));
    expect(states.get(FAST)?.limit).toBe(c.limit(FAST));
    expect(states.get(SLOW)?.endpointIds).toEqual(['ep_1']);
  });

  it('holds its bounds whatever the answers (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 8 }),
        fc.integer({ min: 0, max: 40 }),
        fc.array(
          fc.record({
            ok: fc.boolean(),
            latencyMs: fc.double({ min: 0, max: 20_000, noNaN: true }),
            saturated: fc.boolean(),
            advance: fc.integer({ min: 0, max: 2000 }),
          }),
          { maxLength: 300 },
        ),
        (min, aboveMin, aboveInitial, answers) => {
          const time = clock();
          const bounds = { min, initial: min + aboveMin, max: min + aboveMin + aboveInitial };
          const c = new UrlConcurrency(bounds, time.now);
          for (const a of answers) {
            const sentAt = time.now();
            time.advance(a.advance);
            c.answered(FAST, { ...a, sentAt });
            const limit = c.limit(FAST);
            expect(Number.isInteger(limit)).toBe(true);
            expect(limit).toBeGreaterThanOrEqual(bounds.min);
            expect(limit).toBeLessThanOrEqual(bounds.max);
          }
        },
      ),
    );
  });

  it('refuses bounds that cannot hold, naming them', () => {
    expect(() => new UrlConcurrency({ min: 0 })).toThrow(/min: 0/);
    expect(() => new UrlConcurrency({ initial: 40 })).toThrow(/min <= initial <= max/);
    expect(() => new UrlConcurrency({ max: 2.5 })).toThrow(/max: 2.5/);
    expect(() => new UrlConcurrency({ slowMs: 0 })).toThrow(/slow answer/);
    // Undefined bounds take the defaults.
    expect(new UrlConcurrency({ max: undefined }).bounds.max).toBe(URL_CONCURRENCY_DEFAULTS.max);
  });

  it('forgets the least recently answered URLs past 1,024, which start again at the initial limit', () => {
    const time = clock();
    const c = new UrlConcurrency({}, time.now);
    c.answered('https://first.example/', { ok: false, latencyMs: 1, sentAt: 0, saturated: true });
    expect(c.limit('https://first.example/')).toBe(2);
    for (let i = 0; i < 1024; i++)
      c.answered(`https://u${i}.example/`, { ok: true, latencyMs: 1, sentAt: 0, saturated: false });
    expect(c.snapshot()).toHaveLength(1024);
    expect(c.limit('https://first.example/')).toBe(4);
  });
});
