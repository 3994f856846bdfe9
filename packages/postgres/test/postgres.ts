import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL server of the tests: TEST_DATABASE_URL, never the service's own DATABASE_URL. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A pool on the test server, or a clear failure if it cannot be reached. */
export async function connect(url = TEST_DATABASE_URL, max = 10): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 3000 });
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new Error(
      `Cannot reach the test PostgreSQL at ${url} (${(error as Error).message}). Start it, or set TEST_DATABASE_URL.`,
    );
  }
  return pool;
}

/** A random schema name, so that tests never see each other's tables. */
export function randomSchema(): string {
  return `payhook_test_${randomBytes(6).toString('hex')}`;
}

/** Drops the schemas a test made, with everything in them. */
export async function dropSchemas(pool: pg.Pool, schemas: string[]): Promise<void> {
  for (const schema of schemas.splice(0)) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
