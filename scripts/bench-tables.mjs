// The tables of bench/README.md, one renderer per benchmark, each reading the `results` that
// benchmark's script passes to `writeResults(...)` (bench/<name>.ts). A benchmark without a
// renderer here, or whose results no longer have the shape its renderer reads, gets `generic`: a
// flattened table of its numbers, so that a new or changed benchmark never breaks the README.

/** A Markdown table; columns of figures right-aligned, columns of words left-aligned. */
export function table(header, rows) {
  const line = (cells) => `| ${cells.map((c) => String(c ?? '').replaceAll('|', '\\|')).join(' | ')} |`;
  const figures = header.map((_, i) => {
    const cells = rows.map((r) => String(r[i] ?? '')).filter((c) => c !== '');
    return cells.length > 0 && cells.filter((c) => /^-?\d/.test(c)).length * 2 > cells.length;
  });
  const rule = `|${figures.map((right) => (right ? '---:' : '---')).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** 12,345 (thousands grouped by hand: the output must not depend on the locale data of Node). */
export function int(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return 'n/a';
  const sign = n < 0 ? '-' : '';
  return sign + String(Math.round(Math.abs(n))).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A number with `digits` decimals; `n/a` when absent. */
export function dec(n, digits = 2) {
  return typeof n === 'number' && Number.isFinite(n) ? n.toFixed(digits) : 'n/a';
}

const ratio = (n) => (typeof n === 'number' && Number.isFinite(n) ? `${n.toFixed(2)}x` : 'n/a');
const ms = (n) => (typeof n === 'number' && Number.isFinite(n) ? n.toFixed(n < 10 ? 2 : 1) : 'n/a');
const us = (n) => (typeof n === 'number' && Number.isFinite(n) ? `${int(n)} µs` : 'n/a');
const mb = (bytes) => {
  if (typeof bytes !== 'number') return 'n/a';
  const n = bytes / 1024 / 1024;
  return n >= 100 ? int(n) : n.toFixed(1);
};
const pct = (n) => (typeof n === 'number' && Number.isFinite(n) ? `${(n * 100).toFixed(1)}%` : 'n/a');
const STORAGES = ['postgres', 'pglite'];
const storageName = (s) =>
  ({ postgres: 'PostgreSQL', pglite: 'PGlite', 'pglite-busy': 'PGlite, the other core busy' })[s] ??
  (/^postgres-(\d+)$/.test(s) ? `PostgreSQL, ${s.slice('postgres-'.length)} processes` : s);
/** The storages a result holds, PostgreSQL first, then any other key whose value is an object. */
const storagesOf = (r, isRun = (v) => v && typeof v === 'object') =>
  [...STORAGES, ...Object.keys(r).filter((k) => !STORAGES.includes(k))].filter((k) => isRun(r[k]));

function verify(r) {
  const { runtimes, ...sizes } = r;
  const rows = [];
  for (const [size, verifiers] of Object.entries(sizes))
    for (const [name, v] of Object.entries(verifiers))
      rows.push([size, name, int(v.opsPerSec), ratio(v.xFloor), ratio(v.xStripe), ratio(v.xNaive), v.target]);
  if (rows.length === 0) throw new Error('no rows');
  const main = table(['body', 'verifier', 'verifies/s', 'x floor', 'x stripe', 'x naive', 'target'], rows);
  if (!runtimes) return main;
  // bench/verify-runtime.mjs on each runtime: x standardwebhooks is against its verify there.
  const runtimeRows = [];
  for (const run of Object.values(runtimes))
    for (const [size, verifiers] of Object.entries(run.results))
      for (const [name, ops] of Object.entries(verifiers))
        runtimeRows.push([
          `${run.runtime} ${run.version}`,
          size,
          name,
          int(ops),
          ratio(ops / verifiers['standardwebhooks verify']),
        ]);
  return `${main}\n\nOn each runtime, the same body verified by payhook on its Web path (where node:crypto is missing: a JavaScript HMAC up to 12 KB, Web Crypto above; on Bun, Bun's native HMAC at any length), on its default path, and by the standardwebhooks package (x standardwebhooks: against its verify on that runtime):\n\n${table(['runtime', 'body', 'verifier', 'verifies/s', 'x standardwebhooks'], runtimeRows)}`;
}

function http(r) {
  const frameworks = Object.keys(r)
    .filter((k) => k.endsWith(' payhook'))
    .map((k) => k.slice(0, -' payhook'.length));
  const rows = frameworks.map((f) => {
    const bare = r[`${f} bare`];
    const ph = r[`${f} payhook`];
    return [
      f,
      int(bare.rps),
      int(ph.rps),
      ratio(ph.xReqPerSec),
      `${bare.p50} / ${bare.p99}`,
      `${ph.p50} / ${ph.p99}`,
      ratio(ph.xP99),
      `${dec(bare.cpuUsPerRequest, 0)} / ${dec(ph.cpuUsPerRequest, 0)}`,
      ratio(ph.xCpuPerRequest),
      [ph.reqPerSecTarget, ph.p99Target].filter(Boolean).join('; '),
    ];
  });
  if (rows.length === 0) throw new Error('no rows');
  return table(
    [
      'framework',
      'bare req/s',
      'payhook req/s',
      'x req/s',
      'bare p50 / p99 ms',
      'payhook p50 / p99 ms',
      'x p99',
      'server CPU µs/req bare / payhook',
      'x CPU',
      'target (req/s; p99)',
    ],
    rows,
  );
}

function queueMemory(r) {
  const rows = ['unbounded', 'bounded'].map((k) => [
    k === 'bounded' ? 'bounded (defaults)' : 'bound raised past the flood',
    int(r[k].accepted),
    int(r[k].refused),
    mb(r[k].grownBytes),
    int(r[k].perAcceptedBytes),
  ]);
  return `${int(r.events)} events of ${int(r.bodyBytes)} bytes, every handler stuck.\n\n${table(
    ['receiver', 'accepted', 'refused (503)', 'heap grown, MB', 'bytes per accepted event'],
    rows,
  )}`;
}

function redis(r) {
  const runs = Object.entries(r).filter(([, v]) => v && typeof v === 'object');
  const base = runs[0]?.[1].eventsPerSecond;
  const rows = runs.map(([name, v]) => [
    name,
    int(v.eventsPerSecond),
    ratio(v.eventsPerSecond / base),
    dec(v.roundTripsPerEvent),
    int(v.bytesPerRetainedEvent),
    int(v.memoryUsageOfOneTombstone),
  ]);
  if (rows.length === 0) throw new Error('no rows');
  return `${int(r.events)} events per deployment.\n\n${table(
    [
      'deployment',
      'events/s',
      `x ${runs[0][0]}`,
      'round trips/event',
      'bytes/retained event',
      'tombstone bytes',
    ],
    rows,
  )}`;
}

function stores(r) {
  const runs = Object.values(r).filter((v) => v && typeof v === 'object' && 'store' in v);
  const name = (store) => ({ postgres: 'PostgreSQL', redis: 'Redis' })[store] ?? store;
  const rows = runs.map((v) => [
    name(v.store),
    int(v.instances),
    int(v.history ?? 0),
    int(v.eventsPerSecond),
    ratio(v.xRedis),
    ms(v.ackP50Ms),
    ms(v.ackP99Ms),
    int(v.ackErrors),
    v.refused === undefined ? '' : int(v.refused),
    v.postgresCpuUs === undefined
      ? ''
      : `${int(v.receiversCpuUs)} / ${int(v.postgresCpuUs)} / ${v.redisCpuUs === undefined || v.store !== 'redis' ? '-' : int(v.redisCpuUs)}`,
  ]);
  if (rows.length === 0) throw new Error('no rows');
  return `${int(r.events)} events for events/s; ${int(r.rate)} events/s for ${int(r.seconds)} s for the acknowledgement latency. Targets: PostgreSQL >= 0.70x Redis, ack p99 <= 10 ms. The row with records before ran on an inbox that already held them. Not 200: answers of the latency run; refused: answers of the events/s run other than 200, each sent again after 5 ms.\n\n${table(
    [
      'store',
      'instances',
      'records before',
      'events/s',
      'x Redis',
      `ack p50 at ${int(r.rate)}/s, ms`,
      'ack p99, ms',
      'not 200',
      'refused, sent again',
      'CPU µs/event: receivers / PostgreSQL / Redis',
    ],
    rows,
  )}`;
}

function senderApi(r) {
  const rows = storagesOf(r).map((s) => {
    const { bare, sender } = r[s];
    return [
      storageName(s),
      int(bare.rps),
      int(sender.rps),
      ratio(sender.rps / bare.rps),
      `${bare.p50} / ${bare.p99}`,
      `${sender.p50} / ${sender.p99}`,
      int(bare.non2xx + bare.errors + sender.non2xx + sender.errors),
    ];
  });
  const main = table(
    [
      'storage',
      'bare INSERT/s',
      'sessions/s',
      'x bare',
      'bare p50 / p99 ms',
      'sender p50 / p99 ms',
      'failed',
    ],
    rows,
  );
  // The webhook endpoints' filter check: one endpoint taking the event, then 10,000 in the table.
  const filtered = storagesOf(r).filter((s) => r[s].endpoints);
  if (filtered.length === 0) return main;
  const endpointRows = filtered.flatMap((s) => {
    const e = r[s].endpoints;
    return [
      ['1', e.one],
      [int(e.endpoints), e.filtered],
    ].map(([count, x]) => [
      storageName(s),
      count,
      int(x.rps),
      ratio(x.rps / e.one.rps),
      `${x.p50} / ${x.p99}`,
      int(x.non2xx + x.errors),
    ]);
  });
  return `${main}\n\nWith webhook endpoints (one delivery row a session either way; the 10,000 include 19 of the business whose filters leave the event out):\n\n${table(['storage', 'endpoints', 'sessions/s', 'x 1 endpoint', 'p50 / p99 ms', 'failed'], endpointRows)}`;
}

function delivery(r) {
  const storages = storagesOf(r);
  const rows = storages.map((s) => {
    const d = r[s];
    return [
      storageName(s),
      int(d.bare.perSecond),
      int(d.bareSigned.perSecond),
      int(d.worker.perSecond),
      ratio(d.ratio),
      ratio(d.signedRatio),
      us(d.worker.cpuUs),
      s === 'pglite' ? '(in process)' : us(d.worker.postgresCpuUs),
    ];
  });
  const claims = storages.flatMap((s) =>
    r[s].claim.map((c) => [
      storageName(s),
      int(c.pending),
      ms(c.p50),
      ms(c.p99),
      int(c.claimed),
      ratio(c.p50 / r[s].claim[0].p50),
    ]),
  );
  return `${int(r[storages[0]].deliveries)} deliveries per run; the best of two runs each.\n\n${table(
    [
      'storage',
      'bare loop/s',
      'bare loop signed/s',
      'worker/s',
      'x bare',
      'x bare signed',
      'worker CPU/delivery',
      'PostgreSQL CPU/delivery',
    ],
    rows,
  )}\n\nOne claim of 32 by the pending rows in the table:\n\n${table(
    ['storage', 'pending', 'claim p50 ms', 'claim p99 ms', 'rows', 'x p50 of the first'],
    claims,
  )}`;
}

function deliveryBacklog(r) {
  const rows = r.throughput.map((t) => [
    t.scenario,
    int(t.perSecond),
    ratio(t.ratio),
    us(t.cpuUs),
    us(t.postgresCpuUs),
    (t.runs ?? []).map(int).join(', '),
    t.target,
  ]);
  const claims = (r.claims ?? []).map((c) => [c.case, ms(c.p50Ms), int(c.rows)]);
  return `${table(
    [
      'scenario',
      'deliveries/s (best)',
      'x reference',
      'CPU/delivery',
      'PostgreSQL CPU/delivery',
      'runs',
      'target',
    ],
    rows,
  )}\n\nOne claim (p50 of 200, rolled back):\n\n${table(['case', 'p50 ms', 'rows'], claims)}`;
}

function deliveryPeers(r) {
  const rows = [];
  for (const [depth, sides] of Object.entries(r.depths)) {
    const payhook = sides.find((s) => s.side.startsWith('payhook'))?.perSecond;
    for (const s of sides)
      rows.push([
        int(Number(depth)),
        s.side,
        int(s.perSecond),
        ratio(payhook / s.perSecond),
        us(s.cpuUs),
        us(s.postgresCpuUs),
      ]);
  }
  const grid = Object.entries(r.pgBossGrid ?? {}).flatMap(([depth, settings]) =>
    Object.entries(settings).map(([setting, perSecond]) => [int(Number(depth)), setting, int(perSecond)]),
  );
  return `${int(r.concurrency)} requests in flight on every side.\n\n${table(
    ['queued', 'side', 'deliveries/s', 'payhook ÷ side', 'CPU/delivery', 'PostgreSQL CPU/delivery'],
    rows,
  )}\n\npg-boss, each setting of the grid:\n\n${table(['queued', 'setting', 'deliveries/s'], grid)}`;
}

function deliveryInstances(r) {
  const one = r.results[0]?.perSecond;
  const rows = r.results.map((x) => [
    int(x.instances),
    int(x.perSecond),
    ratio(x.perSecond / one),
    dec(x.seconds, 1),
    int(x.requests),
    int(x.sentTwice),
  ]);
  return `${int(r.deliveries)} deliveries to ${int(r.urls)} URLs.\n\n${table(
    ['instances', 'deliveries/s', 'x one', 'seconds', 'requests', 'sent twice'],
    rows,
  )}`;
}

function listen(r) {
  const rows = storagesOf(r).map((s) => {
    const { worker, listen: l, ratio: x } = r[s];
    return [
      storageName(s),
      int(worker.perSecond),
      int(l.perSecond),
      ratio(x),
      us(worker.cpuUs),
      us(l.cpuUs),
      us(l.listenerCpuUs),
      typeof r.target === 'number' ? (x >= r.target ? 'met' : 'missed') : '',
    ];
  });
  return `${int(r.events)} events, ${int(r.concurrency)} in flight.\n\n${table(
    [
      'storage',
      'worker events/s',
      'listen events/s',
      'x worker',
      'worker CPU/event',
      'service CPU/event (listen)',
      'listener CPU/event',
      `target ${dec(r.target, 1)}x`,
    ],
    rows,
  )}`;
}

function dashboard(r) {
  const list = storagesOf(r.list).map((s) => [
    storageName(s),
    ms(r.list[s].jsonMs),
    ms(r.list[s].pageMs),
    ratio(r.list[s].pageOverJson),
  ]);
  const live = r.live.pairs.map((p, i) => [
    String(i + 1),
    int(p.without.perSecond),
    int(p.with.perSecond),
    pct(1 - p.with.perSecond / p.without.perSecond),
    ratio(p.with.cpuUs / p.without.cpuUs),
    pct(p.with.clientCores),
  ]);
  live.push(['median', '', '', pct(r.live.medianSlowdown), ratio(r.live.medianCpuRatio), '']);
  return `The events list with ${int(r.events)} events:\n\n${table(
    ['storage', 'JSON API ms', 'dashboard page ms', 'page ÷ JSON'],
    list,
  )}\n\n${int(r.live.deliveries)} deliveries, without and with ${int(r.live.dashboards)} open dashboards (PostgreSQL):\n\n${table(
    [
      'pair',
      'deliveries/s without',
      'with',
      'slower by',
      'sender CPU with ÷ without',
      "dashboards' process, of a core",
    ],
    live,
  )}`;
}

function sandboxSoak(r) {
  const { off, on } = r;
  const rows = off.steps.map((a, i) => {
    const b = on.steps[i] ?? {};
    const d = (x) => x.tables?.deliveries ?? {};
    return [
      int(a.delivered),
      `${int(a.perSecond)} / ${int(b.perSecond)}`,
      ratio(b.perSecond / a.perSecond),
      `${mb(d(a).bytes)} / ${mb(d(b).bytes)}`,
      `${int(d(a).dead)} / ${int(d(b).dead)}`,
      `${mb(a.diskBytes)} / ${mb(b.diskBytes)}`,
      `${mb(a.walBytes)} / ${mb(b.walBytes)}`,
      `${int(b.maintenanceMs)} ms`,
    ];
  });
  const passes = on.passes ?? [];
  const longest = passes.reduce((m, p) => (p.ms > (m?.ms ?? -1) ? p : m), undefined);
  const total = passes.reduce((t, p) => t + p.ms, 0);
  const first = (off.firstPass ?? []).map((p) => [p.table, p.action, int(p.deadRows), ms(p.ms)]);
  return `${int(r.deliveries)} deliveries in steps of ${int(r.step)}, maintenance off / on. Over the run: ${int(off.perSecond)} / ${int(on.perSecond)} deliveries a second (${ratio(on.perSecond / off.perSecond)}); maintenance ran ${int(passes.length)} statements, ${int(total)} ms in all${longest ? `, the longest a ${dec(longest.ms, 0)} ms ${longest.action} of ${longest.table}` : ''}.\n\n${table(
    [
      'delivered',
      'deliveries/s off / on',
      'on ÷ off',
      'deliveries table MB',
      'dead rows',
      'disk MB',
      'of which WAL MB',
      'maintenance in the step',
    ],
    rows,
  )}\n\nThe first pass over the database never maintained, at the end:\n\n${table(['table', 'statement', 'dead rows', 'ms'], first)}`;
}

/** A run's errors, with their answers when there are any: `55,480 (503: 55,000; no answer: 480)`. */
function errorsCell(x) {
  const by = Object.entries(x.errorsByAnswer ?? {});
  if (!x.errors || by.length === 0) return int(x.errors);
  return `${int(x.errors)} (${by.map(([answer, n]) => `${answer}: ${int(n)}`).join('; ')})`;
}

function latency(r) {
  const rows = [];
  for (const s of storagesOf(r, Array.isArray))
    for (const x of r[s])
      rows.push([
        storageName(s),
        int(x.rate),
        ms(x.latencyMs?.p50),
        ms(x.latencyMs?.p90),
        ms(x.latencyMs?.p99),
        ms(x.latencyMs?.max),
        ratio(x.growth),
        ms(x.apiMs?.p99),
        int(x.sessions),
        int(x.missing),
        errorsCell(x),
        x.acknowledgedPerSecond === undefined ? '' : int(x.acknowledgedPerSecond),
        x.senderCpuPercent === undefined ? '' : `${int(x.senderCpuPercent)} %`,
        x.waits === undefined
          ? ''
          : Object.entries(x.waits)
              .slice(0, 3)
              .map(([w, share]) => `${w} ${int(100 * share)} %`)
              .join(', '),
      ]);
  if (rows.length === 0) throw new Error('no rows');
  return `${int(r.seconds)} s at each rate; latency from the API's 201 to the receiver, in ms; growth is the p50 of the last third of the run over the first; errors, the answers other than 201, by status or no answer in 30 s; acknowledged/s, the 201s a second; sender CPU, of one core, every sender process together; waits, what PostgreSQL's active backends waited on (CPU: none), in shares of the samples.\n\n${table(
    [
      'storage',
      'sessions/s',
      'p50',
      'p90',
      'p99',
      'max',
      'growth',
      'API p99',
      'sessions',
      'missing',
      'errors',
      'acknowledged/s',
      'sender CPU',
      'waits',
    ],
    rows,
  )}`;
}

function slowEndpoints(r) {
  const rows = [];
  for (const s of storagesOf(r))
    for (const side of ['alone', 'beside', 'beside, no maintenance']) {
      const x = r[s][side];
      if (!x) continue;
      rows.push([
        storageName(s),
        side === 'alone'
          ? 'alone'
          : side === 'beside'
            ? 'beside the bad URLs'
            : 'beside the bad URLs, PGlite maintenance off',
        ms(x.p50),
        ms(x.p90),
        ms(x.p99),
        ratio(x.p99 / r[s].alone?.p99),
        int(x.deliveries),
        int(x.missing),
        x.badAttempts === undefined ? '' : int(x.badAttempts),
      ]);
    }
  if (rows.length === 0) throw new Error('no rows');
  return `${int(r.healthyUrls)} healthy URLs at ${int(r.rate)} sessions/s for ${int(r.seconds)} s; the bad URLs have ${int(r.backlog)} deliveries due each. Latency from the API's 201 to the receiver, in ms (below 0 when the event arrived before the client had read the 201).\n\n${table(
    [
      'storage',
      'healthy URLs',
      'p50',
      'p90',
      'p99',
      'p99 ÷ alone',
      'deliveries',
      'missing',
      'attempts to bad URLs',
    ],
    rows,
  )}`;
}

function history(r) {
  const s = r.seeded;
  const cell = (x) => (x ? `${ms(x.medianMs)} (${ms(x.maxMs)})` : 'n/a');
  const failed = (x) =>
    Object.entries(x?.failed ?? {})
      .map(([status, n]) => `${status} x${int(n)}`)
      .join(', ') + (x?.codes ? ` (${x.codes.join(', ')})` : '');
  const rows = r.calls.map((c) => {
    const answers = [failed(c.empty), failed(c.history)];
    return [
      c.call,
      cell(c.empty),
      cell(c.history),
      ratio(c.ratio),
      answers.some(Boolean) ? answers.map((a) => a || '-').join(' / ') : '',
    ];
  });
  if (rows.length === 0) throw new Error('no rows');
  const logs = ['empty', 'history'].map((side) => {
    const l = r.serverLog?.[side] ?? {};
    const answers = Object.entries(l.answers5xx ?? {}).map(([status, n]) => `${int(n)} ${status}`);
    return `${side}: ${answers.join(', ') || 'no 5xx answer'}, ${int(l.errorLines)} error lines`;
  });
  const l = r.machine?.load;
  const load = l
    ? ` The machine's load (1-minute average, ${int(r.machine.cores)} cores) at the start and the end of each side: empty ${l.empty.map((x) => dec(x, 1)).join(' to ')}, with history ${l.history.map((x) => dec(x, 1)).join(' to ')}.`
    : '';
  return `${int(s.rows.events)} events (${int(s.bigBusinessEvents)} of one business, the rest of ${int(r.businesses)} others, over ${int(r.days)} days), ${int(s.rows.deliveries)} deliveries (${int(s.rows.pending)} pending), ${int(s.rows.attempts)} attempts and ${int(s.rows.payments)} payments: ${mb(s.bytes.tables)} MB of tables and indexes. Seeded in ${int(s.seedSeconds)} s, VACUUM ANALYZE ${int(s.vacuumAnalyzeSeconds)} s, the sender's later migrations ${dec(s.upgradeSeconds, 1)} s. Each call ${int(r.repeat)} times after one to warm up (the start ${int(r.starts)} times, the delete and recover without), in ms: the median, and the largest in brackets; the latency row, the p99 (and the largest) of ${int(r.latencySeconds)} s at ${int(r.rate)} sessions a second. ratio: with history over empty; answers: those not as expected, by status (empty / with history).\n\n${table(
    ['call', 'empty', 'with history', 'ratio', 'answers'],
    rows,
  )}\n\nRecover queued ${(r.recovered?.history ?? []).map(int).join(', ')} with history (empty: ${(r.recovered?.empty ?? []).map(int).join(', ')}). The sender's log: ${logs.join('; ')}.${load}`;
}

function retention(r) {
  const row = (name, side) => [
    name,
    ms(side.latencyMs.p50),
    ms(side.latencyMs.p99),
    ms(side.latencyMs.max),
    int(side.errors),
    int(side.missing),
  ];
  const p = r.pass;
  const removed = p?.removed ?? {};
  return `Two days of ${int(r.dayEvents)} events each (${int(r.seeded.rows.events)} events, ${int(r.seeded.rows.deliveries)} deliveries, ${int(r.seeded.rows.attempts)} attempts); sessions at ${int(r.rate)} a second for ${int(r.seconds)} s each side, latency from the 201 to the receiver's door in ms. The pass keeps one day: it removed ${int(removed.events)} events, ${int(removed.deliveries)} deliveries and ${int(removed.delivery_attempts)} attempts in ${dec(p?.seconds, 1)} s (${int(p?.batches)} batches${p?.complete ? '' : ', not complete'}).\n\n${table(
    ['', 'p50', 'p99', 'max', 'errors', 'missing'],
    [row('alone', r.alone), row('during the pass', r.during)],
  )}\n\np99 during the pass over p99 alone: ${ratio(r.p99Ratio)}.`;
}

/** Every number in `value`, by its path: the table of a benchmark nothing here knows. */
export function generic(value) {
  const rows = [];
  const walk = (v, path) => {
    if (typeof v === 'number') rows.push([path || '(value)', Number.isInteger(v) ? int(v) : dec(v, 3)]);
    else if ((typeof v === 'string' || typeof v === 'boolean') && path) rows.push([path, String(v)]);
    else if (Array.isArray(v)) for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
    else if (v && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
  };
  walk(value, '');
  const LIMIT = 200;
  const shown = rows.slice(0, LIMIT);
  const more = rows.length > LIMIT ? `\n\n(${rows.length - LIMIT} more values in the JSON file.)` : '';
  return rows.length === 0 ? '(no numbers in the results)' : `${table(['value', ''], shown)}${more}`;
}

const FLOOD_RUNS = {
  pglite: 'PGlite, wait bounded (2 s)',
  'pglite-unbounded': 'PGlite, wait unbounded',
  postgres: 'PostgreSQL, wait bounded (2 s)',
};

function flood(r) {
  const rows = r.runs.map((x) => [
    FLOOD_RUNS[x.run] ?? x.run,
    Object.entries(x.answers)
      .map(([answer, n]) => `${answer}: ${int(n)}`)
      .join(', '),
    int(x.acknowledgedPerSecond),
    int(x.answerMs.p50),
    int(x.answerMs.p99),
    int(x.answerMs.max),
    int(x.firstMs.p50),
    int(x.firstMs.p99),
    int(x.missing),
  ]);
  return `${int(r.connections)} clients for ${int(r.seconds)} s; answer times in ms.\n\n${table(
    ['run', 'answers', 'acknowledged/s', 'p50', 'p99', 'max', 'first 2 s p50', 'first 2 s p99', 'missing'],
    rows,
  )}`;
}

/** The renderers by benchmark name (bench/results/<name>.json). */
export const RENDERERS = {
  verify,
  http,
  'queue-memory': queueMemory,
  redis,
  stores,
  'sender-api': senderApi,
  delivery,
  'delivery-backlog': deliveryBacklog,
  'delivery-peers': deliveryPeers,
  'delivery-instances': deliveryInstances,
  listen,
  dashboard,
  'sandbox-soak': sandboxSoak,
  latency,
  flood,
  'slow-endpoints': slowEndpoints,
  history,
  retention,
};
