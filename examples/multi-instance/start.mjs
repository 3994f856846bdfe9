// Starts three receiver instances on ports 3001-3003 sharing REDIS_URL, sends them 1,000 signed
// events (20% delivered twice), and prints how many times each event's handler ran.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { stream } from './send.mjs';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `payhook:example:${Date.now()}`;
const children = [];
for (const port of [3001, 3002, 3003]) {
  const child = spawn(process.execPath, ['receiver.mjs'], {
    cwd: new URL('.', import.meta.url),
    env: { ...process.env, REDIS_URL, PORT: String(port), PAYHOOK_PREFIX: prefix },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await once(createInterface({ input: child.stdout }), 'line');
}
const urls = [3001, 3002, 3003].map((p) => `http://127.0.0.1:${p}/webhooks`);
const checksums = await stream({ urls, businessId: 'c5a1f3e2-8b7d-4c6e-9f0a-1b2c3d4e5f60', count: 1000 });
const redis = new Redis(REDIS_URL);
let effects = {};
for (let i = 0; i < 100; i++) {
  effects = await redis.hgetall(`${prefix}:effects`);
  if (Object.keys(effects).length === checksums.length) break;
  await new Promise((r) => setTimeout(r, 100));
}
const runs = Object.values(effects).map(Number);
const byInstance = await redis.hgetall(`${prefix}:runs-by`);
console.log(
  `${checksums.length} events sent (20% twice), ${runs.length} handled, ${runs.filter((n) => n === 1).length} exactly once`,
);
console.log('handler runs by instance:', byInstance);
for (const child of children) child.kill('SIGTERM');
const keys = await redis.keys(`*${prefix}*`);
if (keys.length) await redis.del(...keys);
redis.disconnect();
process.exit(runs.length === checksums.length && runs.every((n) => n === 1) ? 0 : 1);
