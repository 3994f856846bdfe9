import { describe, expect, it } from 'vitest';
import { chartSummary, endpointChart, niceCeiling, type StatsBucket } from '../src/dashboard/chart.js';
import { filterOfForm } from '../src/dashboard/endpoint-routes.js';
import { endpointStatus } from '../src/dashboard/endpoint-views.js';
import { failureView, warningLevel } from '../src/endpoints/health.js';

const DAY = 86_400_000;
const RULE = { afterMs: 5 * DAY, minAttempts: 10 };

const buckets = (values: (Partial<StatsBucket> | null)[]): StatsBucket[] =>
  values.map((v, i) => ({
    start: new Date(Date.UTC(2026, 10, 25, i)).toISOString(),
    attempts: v?.attempts ?? 0,
    succeeded: v?.succeeded ?? 0,
    p50_latency_ms: v?.p50_latency_ms ?? null,
  }));

describe("an endpoint's failure as the API and the dashboard show it", () => {
  it('warns at 50, 75 and 90 % of the period and not before', () => {
    expect([0, 49, 50, 74, 75, 89, 90, 99, 100].map(warningLevel)).toEqual([
      null,
      null,
      50,
      50,
      75,
      75,
      90,
      90,
      90,
    ]);
  });

  it('counts the period from the first failure, and never promises a disable time in the past', () => {
    const since = new Date('2026-11-20T00:00:00Z');
    const row = { endpoint_id: 'e', failing_since: since, last_failure_at: since, attempts: 3, warned: 0 };
    const at = (days: number) => new Date(since.getTime() + days * DAY);
    expect(failureView(row, RULE, at(3.75))).toMatchObject({
      period_percent: 75,
      warning: 75,
      failed_attempts: 3,
      disables_at: '2026-11-25T00:00:00.000000Z',
    });
    // Past the period with too few attempts: still enabled, due as soon as the next one fails.
    expect(failureView(row, RULE, at(7))).toMatchObject({
      period_percent: 100,
      warning: 90,
      disables_at: '2026-11-27T00:00:00.000000Z',
    });
    // A clock behind the first failure reads 0 %, and a rule that never disables warns of nothing.
    expect(failureView(row, RULE, at(-1)).period_percent).toBe(0);
    expect(failureView(row, { afterMs: 0, minAttempts: 10 }, at(6))).toMatchObject({
      warning: null,
      disables_at: null,
    });
  });

  it('says the status in words and a symbol, the warning with it', () => {
    const failure = failureView(
      { endpoint_id: 'e', failing_since: new Date(0), last_failure_at: new Date(0), attempts: 1, warned: 0 },
      RULE,
      new Date(4 * DAY),
    );
    expect(endpointStatus({ status: 'enabled', disabled_reason: null, failure: null }).text).toContain(
      '✓ enabled',
    );
    expect(endpointStatus({ status: 'enabled', disabled_reason: null, failure }).text).toContain(
      '⚠ enabled, failing (75 %)',
    );
    expect(endpointStatus({ status: 'disabled', disabled_reason: 'failing', failure }).text).toContain(
      '⏸ disabled (failing)',
    );
  });
});

describe("the endpoint page's chart", () => {
  it('draws a bar per bucket with attempts, the failed share above, and the latency line broken by empty buckets', () => {
    const svg = endpointChart(
      {
        label: 'Last 24 hours',
        bucketSeconds: 3600,
        buckets: buckets([
          { attempts: 4, succeeded: 3, p50_latency_ms: 40 },
          { attempts: 2, succeeded: 2, p50_latency_ms: 60 },
          null,
          { attempts: 1, succeeded: 0, p50_latency_ms: 900 },
        ]),
      },
      'c',
    ).text;
    expect(svg.match(/<rect class="ok"/g)).toHaveLength(3);
    expect(svg.match(/<rect class="fail"/g)).toHaveLength(3);
    expect(svg.match(/<polyline class="latency"/g)).toHaveLength(1);
    expect(svg.match(/<circle class="latency"/g)).toHaveLength(1);
    expect(svg).toContain('1000 ms');
    expect(svg).toContain('role="img"');
    expect(svg).toContain(
      '<desc id="c-desc">Last 24 hours: 71.4 % of 7 attempts succeeded; typical median latency 60 ms.</desc>',
    );
    // Nothing the page's CSP refuses: no inline style, no script.
    expect(svg).not.toMatch(/style=|<script/);
  });

  it('draws an empty window without a bar or a line, and says so', () => {
    const data = { label: 'Last 7 days', bucketSeconds: 6 * 3600, buckets: buckets([null, null, null]) };
    const svg = endpointChart(data, 'e').text;
    expect(svg).not.toMatch(/<rect|<polyline|<circle/);
    expect(chartSummary(data)).toEqual({ attempts: 0, rate: null, text: 'Last 7 days: no attempt.' });
    expect(svg).toContain('Nov 25');
  });

  it('rounds the latency axis up to 1, 2 or 5 times a power of ten', () => {
    expect([0, 1, 7, 40, 101, 250, 999, 4500].map(niceCeiling)).toEqual([
      100, 1, 10, 50, 200, 500, 1000, 5000,
    ]);
  });
});

describe("the add form's event filter", () => {
  it('is every event when "every event" is checked or nothing is, else the types checked', () => {
    expect(filterOfForm([])).toEqual(['*']);
    expect(filterOfForm(['*', 'payment.session.failed'])).toEqual(['*']);
    expect(filterOfForm(['payment.session.failed', 'payment.session.created'])).toEqual([
      'payment.session.failed',
      'payment.session.created',
    ]);
  });
});
