import { describe, expect, it } from 'vitest';
import { type HistoryRow, missedGaps } from '../src/delivery/recover-gaps.js';

const at = (day: number) => new Date(Date.UTC(2026, 10, day));
const row = (day: number, status: HistoryRow['status'], enabled_events: string[] = ['*']): HistoryRow => ({
  at: at(day),
  status,
  enabled_events,
});
const window = { since: at(10), until: at(20) };
const span = (gaps: ReturnType<typeof missedGaps>) =>
  gaps.map((g) => [g.from.getUTCDate(), g.until.getUTCDate(), g.types]);

describe('the times a recovery reads the events of', () => {
  it('are none for an endpoint always enabled, its filter unchanged', () => {
    const endpoint = { created_at: at(1), enabled_events: ['*'] };
    expect(missedGaps(endpoint, [row(1, 'enabled')], window)).toEqual([]);
    const narrow = { created_at: at(1), enabled_events: ['payment.session.failed'] };
    expect(missedGaps(narrow, [row(1, 'enabled', ['payment.session.failed'])], window)).toEqual([]);
  });

  it('are its disabled times, every type, cut to the window and to its life', () => {
    const endpoint = { created_at: at(1), enabled_events: ['*'] };
    const history = [
      row(1, 'enabled'),
      row(5, 'disabled'),
      row(12, 'enabled'),
      row(15, 'disabled'),
      row(17, 'enabled'),
    ];
    expect(span(missedGaps(endpoint, history, window))).toEqual([
      [10, 12, { kind: 'all' }],
      [15, 17, { kind: 'all' }],
    ]);
    // Disabled now: up to the window's end.
    expect(span(missedGaps(endpoint, [row(1, 'enabled'), row(18, 'disabled')], window))).toEqual([
      [18, 20, { kind: 'all' }],
    ]);
  });

  it('are the times its filter left out a type it takes now, for those types only', () => {
    const all = { created_at: at(1), enabled_events: ['*'] };
    const history = [row(1, 'enabled', ['payment.session.failed']), row(14, 'enabled', ['*'])];
    expect(span(missedGaps(all, history, window))).toEqual([
      [10, 14, { kind: 'except', types: ['payment.session.failed'] }],
    ]);
    const two = {
      created_at: at(1),
      enabled_events: ['payment.session.failed', 'payment.session.succeeded'],
    };
    expect(
      span(
        missedGaps(
          two,
          [row(1, 'enabled', ['payment.session.failed']), row(14, 'enabled', two.enabled_events)],
          window,
        ),
      ),
    ).toEqual([[10, 14, { kind: 'only', types: ['payment.session.succeeded'] }]]);
    // Narrowed later: what it took then it takes no more, nothing to read.
    const narrowed = { created_at: at(1), enabled_events: ['payment.session.failed'] };
    expect(
      missedGaps(narrowed, [row(1, 'enabled'), row(14, 'enabled', ['payment.session.failed'])], window),
    ).toEqual([]);
  });

  it('are everything before its history begins (made before the history was kept), and joined where they meet', () => {
    const endpoint = { created_at: at(1), enabled_events: ['*'] };
    expect(span(missedGaps(endpoint, [row(13, 'disabled'), row(16, 'enabled')], window))).toEqual([
      [10, 16, { kind: 'all' }],
    ]);
    expect(span(missedGaps({ created_at: at(12), enabled_events: ['*'] }, [], window))).toEqual([
      [12, 20, { kind: 'all' }],
    ]);
  });
});
