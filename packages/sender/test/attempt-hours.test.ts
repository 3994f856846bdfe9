// @module-tag postgres
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { HISTOGRAM_BUCKETS, histogramQuantile, LATENCY_BOUNDS_MS } from '../src/db/attempt-hours.js';
import { openDatabase } from '../src/index.js';
import { openTestDatabase, TEST_DATABASE_URL } from './fixtures/storage.js';

/** A histogram of `latencies`, bucketed as the record statement buckets them. */
function histogramOf(latencies: readonly number[]): number[] {
  const counts = new Array<number>(HISTOGRAM_BUCKETS).fill(0);
  for (const ms of latencies) {
    const i = LATENCY_BOUNDS_MS.filter((bound) => bound <= ms).length;
    counts[i] = (counts[i] ?? 0) + 1;
  }
  return counts;
}

describe('the latency histogram of the hourly counts', () => {
  it('reads a median within its bucket, and nothing from an empty histogram', () => {
    expect(histogramQuantile(histogramOf([]), 0.5)).toBeNull();
    // 40 and 45 ms are in [30, 50): the median is interpolated there.
    const median = histogramQuantile(histogramOf([40, 45, 48, 200]), 0.5) as number;
    expect(median).toBeGreaterThanOrEqual(30);
    expect(median).toBeLessThan(50);
    expect(histogramQuantile(histogramOf([0, 0, 0]), 0.5)).toBeLessThanOrEqual(1);
    expect(histogramQuantile(histogramOf([120_000]), 0.5)).toBe(30_000);
  });

  it('keeps every median it reads within a third of the exact one, for latencies from 1 ms to 30 s', () => {
    for (let trial = 0; trial < 200; trial++) {
      const center = 1 + Math.random() * 29_999;
      const latencies = Array.from({ length: 51 }, () => Math.round(center * (0.9 + Math.random() * 0.2)));
      const exact = [...latencies].sort((a, b) => a - b)[25] as number;
      const read = histogramQuantile(histogramOf(latencies), 0.5) as number;
      expect(Math.abs(read - exact), `${latencies}`).toBeLessThanOrEqual(Math.max(1, exact / 3));
    }
  });
});

describe('the indexes built beside the migrations', () => {
  it('builds again, at the next start, an index an interrupted concurrent build left invalid', async () => {
    const { database, cleanup } = await openTestDatabase('postgres', 'indexes');
    try {
      const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(database.db)).rows[0]?.s;
      const validity = async () =>
        (
          await sql<{ valid: boolean }>`select i.indisvalid as valid from pg_index i
            join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
            where c.relname = 'events_payment' and n.nspname = ${schema}`.execute(database.db)
        ).rows;
      expect(await validity()).toEqual([{ valid: true }]);
      // What a build cut short by a crash leaves behind.
      await sql`update pg_index set indisvalid = false
        where indexrelid = ${`${schema}.events_payment`}::regclass`.execute(database.db);
      expect(await validity()).toEqual([{ valid: false }]);
      const again = await openDatabase({ url: TEST_DATABASE_URL, schema: schema as string });
      await again.close();
      expect(await validity()).toEqual([{ valid: true }]);
    } finally {
      await cleanup();
    }
  });
});
