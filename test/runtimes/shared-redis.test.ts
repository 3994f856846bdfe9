// @module-tag redis
// @module-tag process
// @module-tag build
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestEvent } from '@payhook/core/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { ROOT, type RuntimeServer, requireBinary, requireBuilt, spawnServer } from './runtime-conformance.js';

// The Redis store (@payhook/redis, ioredis) on Bun and on Deno: a Bun receiver and a Deno receiver,
// each the example as its README starts it, share one Redis, and copies of each event sent to both
// at once are handled once in all.
const bun = requireBinary(`${ROOT}node_modules/bun/bin/bun.exe`, 'Bun (the bun package)');
const deno = requireBinary(`${ROOT}node_modules/deno/deno`, 'Deno (the deno package)');
requireBuilt();

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `payhook-test:runtimes:${randomUUID()}`;
const denoDir = mkdtempSync(join(tmpdir(), 'payhook-deno-'));
const BUSINESS = '2f6c0a3e-8b1d-4c5e-9a7f-3d2e1b0c4a58';

afterAll(async () => {
  rmSync(denoDir, { recursive: true, force: true });
  const redis = new Redis(redisUrl);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

async function startBoth(): Promise<{ bun: RuntimeServer; deno: RuntimeServer }> {
  const env = { BUSINESS_ID: BUSINESS, ALLOWED_IPS: '127.0.0.1', REDIS_URL: redisUrl, REDIS_PREFIX: prefix };
  const [bunPort, denoPort] = [await freePort(), await freePort()];
  const onBun = await spawnServer(bun, ['server.mjs'], {
    cwd: `${ROOT}examples/web-bun`,
    env: { ...env, HOST: '127.0.0.1', PORT: String(bunPort) },
    ready: /bun receiver on /,
  });
  const onDeno = await spawnServer(
    deno,
    ['run', '--allow-net', '--allow-env', '--allow-read', '--no-prompt', '--cached-only', 'server.mjs'],
    {
      cwd: `${ROOT}examples/web-deno`,
      env: {
        ...env,
        HOST: '127.0.0.1',
        PORT: String(denoPort),
        DENO_DIR: denoDir,
        DENO_NO_UPDATE_CHECK: '1',
      },
      ready: /deno receiver on /,
    },
  ).catch(async (error: unknown) => {
    await onBun.close();
    throw error;
  });
  return {
    bun: { ...onBun, url: `http://127.0.0.1:${bunPort}` },
    deno: { ...onDeno, url: `http://127.0.0.1:${denoPort}` },
  };
}

/** Payment ids of the events a runtime's example logged as handed to its handler. */
function handled(runtime: string, output: string): string[] {
  return [...output.matchAll(new RegExp(`^\\[${runtime}\\] \\S+ payment=(\\S+) `, 'gm'))].map(
    (m) => m[1] as string,
  );
}

describe('the Redis store on Bun and Deno', () => {
  it('a Bun and a Deno receiver sharing one Redis handle each event once, whichever gets its copies', async () => {
    const servers = await startBoth();
    try {
      const send = async (server: RuntimeServer, event: unknown) => {
        const response = await fetch(`${server.url}/webhooks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(event),
        });
        return { status: response.status, body: (await response.json()) as { duplicate?: boolean } };
      };
      const batch = () =>
        Array.from({ length: 8 }, () => createTestEvent('payment.session.succeeded', BUSINESS));
      // An event accepted by one runtime is a duplicate to the other.
      for (const [first, other] of [
        [servers.bun, servers.deno],
        [servers.deno, servers.bun],
      ] as const) {
        for (const event of batch()) {
          expect(await send(first, event)).toEqual({ status: 200, body: { received: true } });
          const copies = await Promise.all([send(other, event), send(other, event), send(first, event)]);
          for (const copy of copies)
            expect(copy).toEqual({ status: 200, body: { received: true, duplicate: true } });
        }
      }
      // Three copies of every event to each runtime, all at once: one copy in all is accepted.
      const storm = batch();
      const answers = await Promise.all(
        storm.flatMap((event) =>
          [servers.bun, servers.deno, servers.bun, servers.deno, servers.bun, servers.deno].map((server) =>
            send(server, event),
          ),
        ),
      );
      expect(answers.every((a) => a.status === 200)).toBe(true);
      expect(answers.filter((a) => a.body.duplicate !== true)).toHaveLength(storm.length);
    } finally {
      // SIGTERM: each receiver finishes what it acknowledged before it exits.
      await servers.bun.close();
      await servers.deno.close();
    }
    const onBun = handled('bun', servers.bun.output());
    const onDeno = handled('deno', servers.deno.output());
    // 24 events, each handled once, by one runtime or the other; each runtime took the 8 it was
    // sent first.
    expect(onBun.length + onDeno.length).toBe(24);
    expect(new Set([...onBun, ...onDeno]).size).toBe(24);
    expect(onBun.length).toBeGreaterThanOrEqual(8);
    expect(onDeno.length).toBeGreaterThanOrEqual(8);
  }, 90_000);
});
