import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** The Redis server of the tests: TEST_REDIS_URL, never the service's own REDIS_URL. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A connected client, or a clear failure if the test server cannot be reached. */
export async function connect(url = TEST_REDIS_URL): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000 });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new Error(
      `Cannot reach the test Redis at ${url} (${(error as Error).message}). Start it, or set TEST_REDIS_URL.`,
    );
  }
  return redis;
}

/** A random key prefix, so that tests never see each other's keys. */
export function randomPrefix(): string {
  return `payhook-test:${randomBytes(6).toString('hex')}`;
}

/** Deletes every key a test wrote under `prefix`. */
export async function cleanup(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
