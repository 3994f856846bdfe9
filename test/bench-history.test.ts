// @module-tag process
// @module-tag build
// @module-tag postgres
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// The history benchmarks at a small size: `bench:history` seeds its history, migrates it, and
// makes every call it times on both sides with the answer it expects; `bench:retention` removes a
// day while sessions are delivered. Their figures are taken at full size by hand (bench/README.md);
// this keeps the scripts working. Results go to a directory of the test's, never bench/results.

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function bench(name: string, env: Record<string, string>) {
  const dir = await mkdtemp(join(tmpdir(), `payhook-bench-${name}-`));
  dirs.push(dir);
  await run(process.execPath, ['--import', 'tsx', `bench/${name}.ts`], {
    cwd: root,
    env: {
      ...process.env,
      TSX_TSCONFIG_PATH: 'tsconfig.base.json',
      TEST_DATABASE_URL,
      BENCH_RESULTS_DIR: dir,
      ...env,
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  // biome-ignore lint/suspicious/noExplicitAny: the results are checked field by field below
  return JSON.parse(await readFile(join(dir, `${name}.json`), 'utf8')).results as any;
}

describe('the history benchmarks at a small size', { timeout: 300_000 }, () => {
  it('bench:history seeds, migrates and times every call, each answered as expected on both sides', async () => {
    const r = await bench('history', {
      BENCH_HISTORY_EVENTS: '3000',
      BENCH_HISTORY_BUSINESSES: '20',
      BENCH_HISTORY_REPEAT: '1',
      BENCH_HISTORY_LATENCY_SECONDS: '2',
      BENCH_HISTORY_PENDING: '20',
      BENCH_HISTORY_BACKLOG: '200',
    });
    expect(r.seeded.rows.events).toBeGreaterThan(2500);
    expect(r.calls).toHaveLength(15);
    expect(r.calls.at(-1).call).toContain("another's 200 pending deliveries");
    for (const call of r.calls) {
      expect(call.empty.failed, `${call.call} (empty)`).toEqual({});
      expect(call.history.failed, `${call.call} (history)`).toEqual({});
    }
  });

  it('bench:retention removes the older day while sessions are delivered', async () => {
    const r = await bench('retention', {
      BENCH_RETENTION_DAY_EVENTS: '2000',
      BENCH_RETENTION_SECONDS: '3',
    });
    expect(r.pass.complete).toBe(true);
    expect(r.pass.removed.events).toBeGreaterThan(1500);
    expect(r.alone.errors + r.during.errors).toBe(0);
    expect(r.during.missing).toBe(0);
  });
});
