import { type Html, html } from './html.js';

/** One bucket of an endpoint's attempts, as `GET /webhook-endpoints/{id}/stats` answers it. */
export interface StatsBucket {
  start: string;
  attempts: number;
  succeeded: number;
  p50_latency_ms: number | null;
}

/** A chart's window: its buckets, oldest first, and what it is called. */
export interface ChartData {
  /** `Last 24 hours`, `Last 7 days`. */
  label: string;
  /** Length of a bucket, in seconds. */
  bucketSeconds: number;
  buckets: readonly StatsBucket[];
}

/**
 * A chart's drawing size, in the SVG's own units: the page scales it to its width, text with
 * it. `wide` is drawn from 641 px up; `narrow`, half as wide, on a phone, where `wide`'s
 * labels would shrink to about 6 px (the style sheet shows one of the two).
 */
export interface ChartLayout {
  name: 'wide' | 'narrow';
  width: number;
  height: number;
  pad: { left: number; right: number; top: number; bottom: number };
}

/** The two layouts {@link responsiveChart} draws. */
export const CHART_LAYOUTS = {
  wide: { name: 'wide', width: 640, height: 180, pad: { left: 44, right: 56, top: 12, bottom: 26 } },
  narrow: { name: 'narrow', width: 320, height: 190, pad: { left: 48, right: 56, top: 12, bottom: 28 } },
} as const satisfies Record<string, ChartLayout>;

/** A latency axis's top: 1, 2 or 5 times a power of ten, at or above `max`. */
export function niceCeiling(max: number): number {
  if (!(max > 0)) return 100;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** `14:00` for an hourly chart, `Nov 25` for a longer one (UTC). */
function tickLabel(iso: string, bucketSeconds: number): string {
  const date = new Date(iso);
  if (bucketSeconds < 6 * 3600) return `${iso.slice(11, 16)}`;
  return `${date.toLocaleString('en', { month: 'short', timeZone: 'UTC' })} ${date.getUTCDate()}`;
}

/** The totals a chart's caption states: attempts, the share that succeeded, the median of medians. */
export function chartSummary(data: ChartData): { attempts: number; rate: number | null; text: string } {
  let attempts = 0;
  let succeeded = 0;
  const latencies: number[] = [];
  for (const b of data.buckets) {
    attempts += b.attempts;
    succeeded += b.succeeded;
    if (b.p50_latency_ms !== null) latencies.push(b.p50_latency_ms);
  }
  latencies.sort((a, b) => a - b);
  const rate = attempts === 0 ? null : succeeded / attempts;
  const median = latencies.length === 0 ? null : latencies[Math.floor((latencies.length - 1) / 2)];
  const text =
    attempts === 0
      ? `${data.label}: no attempt.`
      : `${data.label}: ${round1((rate as number) * 100)} % of ${attempts} attempt${attempts === 1 ? '' : 's'} succeeded; typical median latency ${median} ms.`;
  return { attempts, rate, text };
}

/**
 * A server-rendered SVG chart of an endpoint's attempts over a window: one bar per bucket, its
 * height the share that succeeded (the rest, failed, stacked above in the failure colour), and
 * the median latency as a line on the right-hand axis. No script and no inline style (the
 * dashboard's CSP): colours come from the style sheet's classes. A bucket with no attempt has no
 * bar and breaks the line. The summary in words is the image's accessible description.
 *
 * @example
 * ```ts
 * html`<figure>${endpointChart({ label: 'Last 24 hours', bucketSeconds: 3600, buckets })}</figure>`;
 * ```
 */
export function endpointChart(data: ChartData, id: string, layout: ChartLayout = CHART_LAYOUTS.wide): Html {
  const { width: W, height: H, pad: PAD } = layout;
  const PLOT_W = W - PAD.left - PAD.right;
  const PLOT_H = H - PAD.top - PAD.bottom;
  const { buckets } = data;
  const n = Math.max(1, buckets.length);
  const slot = PLOT_W / n;
  const barW = Math.max(1, slot * 0.72);
  const maxLatency = niceCeiling(Math.max(0, ...buckets.map((b) => b.p50_latency_ms ?? 0)));
  const y = (share: number) => PAD.top + PLOT_H * (1 - share);
  const yLatency = (ms: number) => PAD.top + PLOT_H * (1 - Math.min(1, ms / maxLatency));
  const bars: Html[] = [];
  const segments: string[][] = [];
  let segment: string[] = [];
  buckets.forEach((b, i) => {
    const x = PAD.left + i * slot + (slot - barW) / 2;
    if (b.attempts > 0) {
      const ok = b.succeeded / b.attempts;
      const top = y(ok);
      bars.push(
        html`<rect class="fail" x="${round1(x)}" y="${PAD.top}" width="${round1(barW)}" height="${round1(top - PAD.top)}"></rect><rect class="ok" x="${round1(x)}" y="${round1(top)}" width="${round1(barW)}" height="${round1(PAD.top + PLOT_H - top)}"><title>${b.start.slice(0, 16).replace('T', ' ')} UTC: ${round1(ok * 100)} % of ${b.attempts}${b.p50_latency_ms === null ? '' : `, median ${b.p50_latency_ms} ms`}</title></rect>`,
      );
    }
    if (b.p50_latency_ms !== null && b.attempts > 0) {
      segment.push(`${round1(x + barW / 2)},${round1(yLatency(b.p50_latency_ms))}`);
    } else if (segment.length > 0) {
      segments.push(segment);
      segment = [];
    }
  });
  if (segment.length > 0) segments.push(segment);
  const grid = [0, 0.5, 1].map(
    (share) =>
      html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(share)}" y2="${y(share)}"></line><text class="axis" x="${PAD.left - 6}" y="${y(share) + 4}" text-anchor="end">${share * 100} %</text><text class="axis latency" x="${W - PAD.right + 6}" y="${y(share) + 4}">${Math.round(maxLatency * share)} ms</text>`,
  );
  const ticks = [0, Math.floor(buckets.length / 2), buckets.length - 1]
    .filter((i, k, all) => buckets[i] && all.indexOf(i) === k)
    .map((i) => {
      const x = PAD.left + i * slot + slot / 2;
      return html`<text class="axis" x="${round1(x)}" y="${H - 8}" text-anchor="middle">${tickLabel((buckets[i] as StatsBucket).start, data.bucketSeconds)}</text>`;
    });
  const summary = chartSummary(data);
  return html`<svg class="chart ${layout.name}" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-title ${id}-desc" preserveAspectRatio="xMidYMid meet">
<title id="${id}-title">${data.label}: success rate (bars) and median latency (line)</title>
<desc id="${id}-desc">${summary.text}</desc>
${grid}${bars}${segments.map((s) =>
  s.length === 1
    ? html`<circle class="latency" cx="${s[0]?.split(',')[0]}" cy="${s[0]?.split(',')[1]}" r="2.5"></circle>`
    : html`<polyline class="latency" points="${s.join(' ')}"></polyline>`,
)}${ticks}
</svg>`;
}

/**
 * The chart in both layouts, `wide` and `narrow` (ids `<id>-wide`, `<id>-narrow`): the style
 * sheet shows the one that fits the screen, so its labels stay readable on a phone.
 */
export function responsiveChart(data: ChartData, id: string): Html {
  return html`${Object.values(CHART_LAYOUTS).map((layout) => endpointChart(data, `${id}-${layout.name}`, layout))}`;
}
