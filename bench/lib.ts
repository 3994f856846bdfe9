import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** Operations per second of `fn`: median of `rounds` timed rounds after a warm-up. */
export async function opsPerSecond(
  fn: () => unknown,
  { roundMs = 400, rounds = 5 }: { roundMs?: number; rounds?: number } = {},
): Promise<number> {
  const round = timedRound(fn);
  await round(roundMs / 2);
  const results: number[] = [];
  for (let r = 0; r < rounds; r++) results.push(await round(roundMs));
  return median(results);
}

/**
 * How fast `b` is against `a` (ops/s of b over ops/s of a), from rounds of the two taken in turn:
 * a machine that slows down for a while slows both sides of a pair, so the ratio holds where two
 * separate measurements would not. The median of the rounds' ratios.
 */
export async function pairedRatio(
  a: () => unknown,
  b: () => unknown,
  { roundMs = 200, rounds = 9 }: { roundMs?: number; rounds?: number } = {},
): Promise<number> {
  const [roundA, roundB] = [timedRound(a), timedRound(b)];
  await roundA(roundMs / 2);
  await roundB(roundMs / 2);
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // Alternate which side goes first, so neither always runs on a warmer or colder machine.
    let opsA: number;
    let opsB: number;
    if (r % 2 === 0) {
      opsA = await roundA(roundMs);
      opsB = await roundB(roundMs);
    } else {
      opsB = await roundB(roundMs);
      opsA = await roundA(roundMs);
    }
    ratios.push(opsB / opsA);
  }
  return median(ratios);
}

const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;

/** One timed round of `fn` for `ms`: its ops/s. */
function timedRound(fn: () => unknown): (ms: number) => Promise<number> {
  const isAsync = fn() instanceof Promise;
  return async (ms) => {
    let n = 0;
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(ms) * 1_000_000n;
    let now = start;
    while (now < deadline) {
      // Batches keep the clock out of the measurement for fast functions.
      for (let k = 0; k < 16; k++) {
        if (isAsync) await fn();
        else fn();
      }
      n += 16;
      now = process.hrtime.bigint();
    }
    return (n * 1e9) / Number(now - start);
  };
}

/** Formats a number of operations per second for a table. */
export function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1);
}

/** Prints rows as an aligned text table. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Writes a benchmark's results as JSON under bench/results/. */
export function writeResults(name: string, data: unknown): string {
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}${name}.json`;
  const meta = {
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    date: new Date().toISOString(),
  };
  writeFileSync(file, `${JSON.stringify({ ...meta, results: data }, null, 2)}\n`);
  return file;
}

/** The business id the benchmark receivers are configured with. */
export const BENCH_BUSINESS_ID = '9c4a2b1e-7d3f-4e8a-b5c6-1a2b3c4d5e6f';

/** The PostgreSQL server of the benchmarks: TEST_DATABASE_URL, never the service's DATABASE_URL. */
export const BENCH_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Runs `measure` on PostgreSQL, given a fresh schema name (dropped afterwards), then on PGlite,
 * given a data directory in a temporary folder (removed afterwards).
 */
export async function onEachStorage<T>(
  name: string,
  measure: (storage: 'postgres' | 'pglite', where: string) => Promise<T>,
): Promise<{ postgres: T; pglite: T }> {
  const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
  let postgres: T;
  try {
    postgres = await measure('postgres', schema);
  } finally {
    const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  }
  const dir = await mkdtemp(join(tmpdir(), `payhook-bench-${name}-`));
  try {
    return { postgres, pglite: await measure('pglite', join(dir, 'data')) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** This process's CPU time so far, in µs (user + system). */
export function ownCpu(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/**
 * CPU time of the PostgreSQL server's processes so far, in µs, read from /proc (Linux, with the
 * server on this machine); `undefined` where that cannot be read.
 */
export function postgresCpu(): number | undefined {
  if (process.platform !== 'linux') return undefined;
  let ticks = 0;
  let seen = false;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8').trim();
    } catch {
      continue; // gone, or not ours to read
    }
    const match = /^\d+ \((.*)\) (.*)$/.exec(stat);
    if (match?.[1] !== 'postgres') continue;
    const fields = (match[2] as string).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    seen = true;
  }
  // Clock ticks are 1/100 s on Linux (USER_HZ).
  return seen ? ticks * 10_000 : undefined;
}

/** The bytes of every file under `dir`, its subdirectories included (what it takes on disk). */
export function directoryBytes(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) bytes += directoryBytes(path);
    else if (entry.isFile()) bytes += statSync(path).size;
  }
  return bytes;
}
