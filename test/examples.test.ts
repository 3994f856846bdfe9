import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createTestEvent } from '@payhook/core/testing';
import { afterEach, describe, expect, it } from 'vitest';

// The examples run as a user runs them: `node server.mjs` on the built packages, configured by
// the environment, over real HTTP.
const root = fileURLToPath(new URL('../', import.meta.url));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGTERM');
});

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

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

  it('refuses to start without its configuration', async () => {
    const { child, output } = start(example, { PORT: '0', BUSINESS_ID: '', ALLOWED_IPS: '' });
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(output()).toMatch(/BUSINESS_ID/);
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
