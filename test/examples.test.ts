// @module-tag redis
// @module-tag process
// @module-tag pglite
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { generateSigningSecret, signWebhook } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { freePort } from './support/free-port.js';
import { copyPgliteTemplate } from './support/pglite-template.js';

// The examples run as a user runs them: `node server.mjs` on the built packages, configured by
// the environment, over real HTTP.
const root = fileURLToPath(new URL('../', import.meta.url));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGTERM');
});

function start(example: string, env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['server.mjs'], {
    cwd: `${root}examples/${example}`,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (chunk) => (out += chunk));
  child.stderr?.on('data', (chunk) => (out += chunk));
  return { child, output: () => out };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe.each(['express-receiver', 'koa-receiver', 'fastify-receiver'])('examples/%s', (example) => {
  it('receives a signed event on /webhooks and /webhooks/, and logs it once', async () => {
    const port = await freePort();
    const businessId = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const { output } = start(example, {
      PORT: String(port),
      BUSINESS_ID: businessId,
      ALLOWED_IPS: '127.0.0.1,::1',
    });
    await until(() => output().includes('receiver on'), `${example} to listen`);
    const event = createTestEvent('payment.session.succeeded', businessId);
    for (const path of ['/webhooks', '/webhooks/']) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(event),
      });
      expect(res.status).toBe(200);
    }
    await until(() => output().includes(`payment=${event.data.id}`), 'the handler log line');
    expect(output().split(`payment=${event.data.id}`)).toHaveLength(2);
  });

  it('with WEBHOOK_SECRET, takes an event signed with it and refuses one signed with another secret or unsigned', async () => {
    const port = await freePort();
    const businessId = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const secret = generateSigningSecret();
    const { output } = start(example, {
      PORT: String(port),
      BUSINESS_ID: businessId,
      WEBHOOK_SECRET: secret,
      ALLOWED_IPS: '127.0.0.1,::1',
    });
    await until(() => output().includes('receiver on'), `${example} to listen`);
    const send = (secrets: string[]) => {
      const event = createTestEvent('payment.session.succeeded', businessId);
      const body = JSON.stringify(event);
      const headers = secrets.length > 0 ? signWebhook({ id: event.data.id, body, secrets }) : {};
      return fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    };
    expect((await send([secret])).status).toBe(200);
    const forged = await send([generateSigningSecret()]);
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ error: { code: 'invalid_signature' } });
    const unsigned = await send([]);
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ error: { code: 'signature_required' } });
  });

  it('refuses to start without its configuration', async () => {
    const { child, output } = start(example, { PORT: '0', BUSINESS_ID: '', ALLOWED_IPS: '' });
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(output()).toMatch(/BUSINESS_ID/);
  });
});

describe('examples/prometheus-metrics', () => {
  it('counts requests by outcome and handler runs by event, and serves them on /metrics', async () => {
    const port = await freePort();
    const businessId = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const { output } = start('prometheus-metrics', {
      PORT: String(port),
      BUSINESS_ID: businessId,
      ALLOWED_IPS: '127.0.0.1,::1',
    });
    await until(() => output().includes('receiver on'), 'prometheus-metrics to listen');
    const event = createTestEvent('payment.session.succeeded', businessId);
    const forged = { ...event, checksum: 'ab'.repeat(32) };
    const post = (body: unknown) =>
      fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect([(await post(event)).status, (await post(event)).status, (await post(forged)).status]).toEqual([
      200, 200, 401,
    ]);
    await until(() => output().includes(`payment=${event.data.id}`), 'the handler log line');
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    const lines = text.split('\n');
    expect(lines).toContain('payhook_receiver_requests_total{outcome="accepted",reason=""} 1');
    expect(lines).toContain('payhook_receiver_requests_total{outcome="duplicate",reason=""} 1');
    expect(lines).toContain('payhook_receiver_requests_total{outcome="refused",reason="invalid_checksum"} 1');
    expect(lines).toContain('payhook_receiver_requests_total{outcome="refused",reason="queue_full"} 0');
    expect(lines).toContain(
      'payhook_receiver_handler_duration_seconds_count{event="payment.session.succeeded",result="ok"} 1',
    );
    expect(lines).toContain('payhook_receiver_events{state="queued"} 0');
    expect(text).toMatch(/^payhook_receiver_held_bytes \d+$/m);
  });
});

describe('examples/demo', () => {
  it('exits 0 with every event handled exactly once', async () => {
    const child = spawn(process.execPath, ['examples/demo/index.mjs'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout?.on('data', (chunk) => (out += chunk));
    const [code] = await once(child, 'exit');
    expect(out).toContain('each exactly once');
    expect(code).toBe(0);
  });
});

describe('examples with REDIS_URL', () => {
  const prefix = `payhook-test:examples:${Date.now()}`;
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  afterAll(async () => {
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`*${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('share one Redis store: an event delivered to two instances is handled by one', async () => {
    const businessId = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const env = {
      BUSINESS_ID: businessId,
      ALLOWED_IPS: '127.0.0.1',
      REDIS_URL: redisUrl,
      PAYHOOK_PREFIX: prefix,
    };
    const [p1, p2] = [await freePort(), await freePort()];
    const a = start('express-receiver', { ...env, PORT: String(p1) });
    const b = start('fastify-receiver', { ...env, PORT: String(p2) });
    await until(
      () => a.output().includes('receiver on') && b.output().includes('receiver on'),
      'both receivers',
    );
    const event = createTestEvent('payment.session.created', businessId);
    const answers = await Promise.all(
      [p1, p2].map((port) =>
        fetch(`http://127.0.0.1:${port}/webhooks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(event),
        }).then((res) => res.json() as Promise<{ duplicate?: boolean }>),
      ),
    );
    expect(answers.filter((x) => x.duplicate === true)).toHaveLength(1);
    await until(() => (a.output() + b.output()).includes(`payment=${event.data.id}`), 'the handler');
    await new Promise((r) => setTimeout(r, 200));
    expect((a.output() + b.output()).split(`payment=${event.data.id}`)).toHaveLength(2);
  });
});

describe('examples/sender-sandbox', () => {
  it('drives a running sender through a whole payment with plain HTTP calls', {
    timeout: 60_000,
  }, async () => {
    const { loadConfig, startSender } = await import('@payhook/sender');
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'payhook-sandbox-example-'));
    const key = 'sk_test_sandbox_example';
    await copyPgliteTemplate(join(dir, 'data'));
    const sender = await startSender({
      config: loadConfig({
        PORT: '0',
        PAYHOOK_DATA_DIR: join(dir, 'data'),
        PAYHOOK_API_KEYS: `${key}:4d1f6a2b-8c3e-4f5a-9b6c-7d8e9f0a1b2c:test`,
      }),
      logger: false,
    });
    try {
      const child = spawn(process.execPath, ['index.mjs'], {
        cwd: `${root}examples/sender-sandbox`,
        env: { ...process.env, PAYHOOK_URL: sender.url, PAYHOOK_API_KEY: key },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout?.on('data', (chunk) => (out += chunk));
      child.stderr?.on('data', (chunk) => (out += chunk));
      const [code] = await once(child, 'exit');
      expect(out).toContain('events: payment.session.created, payment.session.succeeded');
      expect(code).toBe(0);
    } finally {
      await sender.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
