import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createReceiver } from '@payhook/core';
import { payhook } from '@payhook/express';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../test/support/free-port.js';

// The built command, run as a user runs it: a process, its output and its exit code.
const bin = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function payhookCli(
  args: string[],
  options: { input?: string; env?: Record<string, string> } = {},
): Promise<Run> {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, NO_COLOR: '1', ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  child.stdin.end(options.input ?? '');
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
}

describe('payhook, the command', { timeout: 60_000 }, () => {
  it('lists its commands and exit codes with --help, and each command has help with examples', async () => {
    const top = await payhookCli(['--help']);
    expect(top.code).toBe(0);
    for (const name of ['demo', 'serve', 'trigger', 'sign', 'verify', 'keys']) {
      expect(top.stdout).toContain(`  ${name} `);
      const help = await payhookCli([name, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: payhook ${name}`));
      expect(help.stdout).toMatch(/Examples?:/);
    }
    expect(top.stdout).toContain('Exit codes');
  });

  it('answers bad usage with a clear message and exit code 2', async () => {
    const unknown = await payhookCli(['fly']);
    expect(unknown).toMatchObject({ code: 2 });
    expect(unknown.stderr).toContain('unknown command "fly"');
    const flag = await payhookCli(['sign', '--business', 'x']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--business'");
    expect(flag.stderr).toContain('payhook sign --help');
    const missing = await payhookCli(['verify']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--business-id is required');
    const mode = await payhookCli(['verify', '--business-id', BIZ, '--canonicalization', 'xml']);
    expect(mode.code).toBe(2);
    expect(mode.stderr).toContain('auto, jcs, lexical');
    expect((await payhookCli([])).code).toBe(2);
  });

  it('signs data from stdin and verifies the result (sign | verify)', async () => {
    const data = '{"id":"pay_1","amount":150000,"status":"settled","customer":{"email":"a@example.com"}}';
    const signed = await payhookCli(['sign', '--business-id', BIZ, '--event', 'payment.session.succeeded'], {
      input: data,
    });
    expect(signed.code).toBe(0);
    const payload = JSON.parse(signed.stdout);
    expect(payload).toMatchObject({
      event: 'payment.session.succeeded',
      checksum: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // Data comes out canonical: keys sorted.
    expect(signed.stdout).toContain(
      '"data":{"amount":150000,"customer":{"email":"a@example.com"},"id":"pay_1"',
    );
    const verified = await payhookCli(['verify', '--business-id', BIZ], { input: signed.stdout });
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain(`valid: payment.session.succeeded, signed with business id ${BIZ}`);
    const asJson = await payhookCli(['verify', '--business-id', 'other', '--business-id', BIZ, '--json'], {
      input: signed.stdout,
    });
    expect(JSON.parse(asJson.stdout)).toEqual({
      ok: true,
      event: 'payment.session.succeeded',
      businessId: BIZ,
      canonicalization: 'lexical',
    });
    expect((await payhookCli(['sign', '--business-id', BIZ], { input: '{"id":' })).code).toBe(1);
  });

  it('exits 1 on a tampered payload and explains the mismatch', async () => {
    const signed = await payhookCli(['sign', '--business-id', BIZ], {
      input: '{"amount":150000,"id":"pay_2"}',
    });
    const tampered = signed.stdout.replace('150000', '1');
    const result = await payhookCli(['verify', '--business-id', BIZ], { input: tampered });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('invalid: invalid_checksum');
    // The explanation: the exact string hashed and the checksum the payload carries.
    expect(result.stdout).toContain('payment.session.succeeded|{"amount":1,"id":"pay_2"}');
    expect(result.stdout).toContain(JSON.parse(tampered).checksum);
    const json = JSON.parse(
      (await payhookCli(['verify', '--business-id', BIZ, '--json'], { input: tampered })).stdout,
    );
    expect(json).toMatchObject({
      ok: false,
      error: { code: 'invalid_checksum' },
      explanation: { ok: false },
    });
    const malformed = await payhookCli(['verify', '--business-id', BIZ], {
      input: '{"event":"x","event":"y"}',
    });
    expect(malformed.code).toBe(1);
    expect(malformed.stdout).toContain('malformed_payload');
  });

  describe('trigger', () => {
    let server: ReturnType<ReturnType<typeof express>['listen']>;
    let url: string;
    const handled: string[] = [];

    beforeAll(async () => {
      const receiver = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1', '::1'] });
      receiver.onAny((event) => {
        handled.push(event.event);
      });
      const app = express();
      app.use('/webhooks', payhook(receiver));
      server = app.listen(0, '127.0.0.1');
      await once(server, 'listening');
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/`;
    });
    afterAll(() => {
      server?.closeAllConnections();
      server?.close();
    });

    it('sends a signed fixture event to a real receiver and prints its answer', async () => {
      const run = await payhookCli([
        'trigger',
        'payment.session.succeeded',
        '--to',
        url,
        '--business-id',
        BIZ,
      ]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('200 OK');
      expect(run.stdout).toContain('{"received":true}');
      const json = await payhookCli([
        'trigger',
        'payment.session.failed',
        '--method',
        'card',
        '--to',
        url,
        '--business-id',
        BIZ,
        '--json',
      ]);
      const parsed = JSON.parse(json.stdout);
      expect(parsed).toMatchObject({
        status: 200,
        body: { received: true },
        payload: { event: 'payment.session.failed' },
      });
      expect(parsed.payload.data).toMatchObject({ status: 'failed', payment_method: { type: 'card' } });
      await expect.poll(() => handled).toEqual(['payment.session.succeeded', 'payment.session.failed']);
    });

    it('sends data from a file, exits 1 when the receiver refuses and 3 when it cannot be reached', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-'));
      try {
        const file = join(dir, 'data.json');
        await writeFile(file, '{"id":"ref_1","amount":5000}');
        const custom = await payhookCli([
          'trigger',
          'payment.refund.created',
          '--data',
          file,
          '--to',
          url,
          '--business-id',
          BIZ,
        ]);
        expect(custom.code).toBe(0);
        const refused = await payhookCli([
          'trigger',
          'payment.session.created',
          '--to',
          url,
          '--business-id',
          'wrong-id',
        ]);
        expect(refused.code).toBe(1);
        expect(refused.stdout).toContain('401');
        expect(refused.stdout).toContain('invalid_checksum');
        const closedPort = await freePort();
        const down = await payhookCli([
          'trigger',
          'payment.session.created',
          '--to',
          `http://127.0.0.1:${closedPort}/`,
          '--business-id',
          BIZ,
        ]);
        expect(down.code).toBe(3);
        expect(down.stderr).toContain('ECONNREFUSED');
        const missing = await payhookCli([
          'trigger',
          'payment.session.created',
          '--data',
          join(dir, 'none.json'),
          '--to',
          url,
          '--business-id',
          BIZ,
        ]);
        expect(missing.code).toBe(2);
        expect(missing.stderr).toContain('ENOENT');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  it('creates API keys (shown once, stored hashed) and lists them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-keys-'));
    try {
      const dataDir = join(dir, 'data');
      const created = await payhookCli([
        'keys',
        'create',
        '--business-id',
        BIZ,
        '--mode',
        'live',
        '--data-dir',
        dataDir,
        '--json',
      ]);
      expect(created.code).toBe(0);
      const { key } = JSON.parse(created.stdout);
      expect(key).toMatch(/^sk_live_/);
      const list = await payhookCli(['keys', 'list', '--data-dir', dataDir, '--json']);
      const keys = JSON.parse(list.stdout);
      expect(keys).toEqual([
        { prefix: key.slice(0, 12), businessId: BIZ, mode: 'live', createdAt: expect.any(String) },
      ]);
      expect(list.stdout).not.toContain(key);
      const bad = await payhookCli([
        'keys',
        'create',
        '--business-id',
        BIZ,
        '--mode',
        'prod',
        '--data-dir',
        dataDir,
      ]);
      expect(bad.code).toBe(2);
      expect((await payhookCli(['keys', 'rotate'])).code).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('serves the sender, printing a test key on first start, and stops on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-serve-'));
    const child = spawn(process.execPath, [bin, 'serve', '--port', '0', '--data-dir', join(dir, 'data')], {
      env: { ...process.env, NO_COLOR: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', PAYHOOK_API_KEYS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.on('data', (c) => (out += c));
      await expect.poll(() => out, { timeout: 30_000 }).toContain('listening on');
      const key = /API key:\s+(\S+)/.exec(out)?.[1];
      const business = /business id:\s+(\S+)/.exec(out)?.[1];
      const base = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      expect(key).toMatch(/^sk_test_/);
      expect(business).toMatch(/^[0-9a-f-]{36}$/);
      const res = await fetch(`${base}/customers/`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('runs the demo: every event the sender recorded delivered, verified and handled once', async () => {
    const run = await payhookCli(['demo', '--json'], {
      // The demo ignores these: it runs on its own embedded defaults.
      env: { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1' },
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({
      ok: true,
      events: 10,
      delivered: 10,
      handled: 10,
      retried: 1,
      forgedRefused: true,
      problems: [],
    });
    const plain = await payhookCli(['demo']);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain('handled exactly once         10');
  });
});
