// @module-tag process
// @module-tag build
// @module-tag pglite
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReceiver } from '@payhook/core';
import { payhook } from '@payhook/express';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startProxy } from '../../../test/support/fault-proxy.js';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import {
  bin,
  cliEnv,
  exitCode,
  payhookCli,
  started,
  startServe,
  startTriggerReceiver,
  stopServe,
} from './run-cli.js';

const BIZ = 'biz_listen_test';
const ENV = { NO_COLOR: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', PAYHOOK_API_KEYS: '', PAYHOOK_API_KEY: '' };

// Real processes (a sender on PGlite, the command): a generous bound, which a hang still reaches.
describe('payhook listen', { timeout: 300_000 }, () => {
  let dir: string;
  let sender: Awaited<ReturnType<typeof startServe>>;
  let base: string;
  let key: string;
  let proxy: FaultProxy;
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      // biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read by the assertions
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  /** Makes a payment session; its payment.session.created event is what the listener gets. */
  const createSession = async () => {
    const res = await call('POST', '/payment-sessions', sessionRequest);
    expect(res.status).toBe(201);
    return res.body.data.payment.id as string;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-listen-'));
    await copyPgliteTemplate(join(dir, 'data'));
    sender = await startServe(join(dir, 'data'), BIZ, [], ENV);
    base = sender.url;
    key = sender.apiKey;
    const { port } = new URL(base);
    proxy = await startProxy({ host: '127.0.0.1', port: Number(port) }, 'http');
  }, 90_000);

  afterAll(async () => {
    await proxy?.close();
    if (sender) await stopServe(sender);
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('forwards every new event, signed, to a local receiver once, resumes after a cut connection, and the attempt log shows it', async () => {
    // The merchant's receiver: checksum and Standard Webhooks signature both required.
    const secrets = await call('GET', '/accounts/signing-secrets');
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowedIps: ['127.0.0.1', '::1'],
      signingSecrets: [secrets.body.data[0].secret],
      requireSignature: true,
    });
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push((event.data as { id: string }).id);
    });
    const app = express();
    // Every request that reaches the receiver, by webhook-id: a copy would show here even
    // though the receiver itself would acknowledge it without running the handler again.
    const requests: string[] = [];
    app.use((req, _res, next) => {
      requests.push(String(req.headers['webhook-id']));
      next();
    });
    app.use('/webhooks', payhook(receiver));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const forwardTo = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;

    const before = await createSession(); // made before the listener connects: not sent to it
    const listener = started(
      spawn(
        process.execPath,
        [bin, 'listen', '--api-key', key, '--base-url', proxy.url, '--forward-to', forwardTo],
        {
          env: cliEnv(ENV),
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      ),
    );
    try {
      await expect.poll(() => listener.out, { timeout: 30_000 }).toContain('Ready!');
      expect(listener.out).toContain(
        `Ready! Forwarding events for business ${BIZ} (test mode) to ${forwardTo}`,
      );

      // Events made one after another while the connection is cut mid-stream, then refused for
      // a while (the listener retries with backoff), then let through again.
      const created: string[] = [];
      const making = (async () => {
        for (let i = 0; i < 20; i++) created.push(await createSession());
      })();
      await expect.poll(() => handled.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
      proxy.drop();
      await expect.poll(() => listener.err, { timeout: 30_000 }).toContain('Connection to the sender lost');
      await new Promise((resolve) => setTimeout(resolve, 1000));
      proxy.restore();
      await making;
      await expect.poll(() => handled.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(20);
      await expect
        .poll(() => listener.out, { timeout: 10_000 })
        .toContain('Reconnected: sending what was missed');
      // A moment for anything sent twice to arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect([...handled].sort()).toEqual([...created].sort());
      expect(new Set(requests).size).toBe(20);
      expect(requests).toHaveLength(20);
      expect(handled).not.toContain(before);

      // Each event printed once, with the local answer.
      const eventLines = listener.out
        .split('\n')
        .filter((l) => l.startsWith('--> payment.session.created ['));
      expect(eventLines).toHaveLength(20);
      expect(listener.out.match(/<-- \[200\] POST /g)).toHaveLength(20);

      // The sender's attempt log: a delivery to cli:<listener id> with the local answer.
      const listenerId = /Listener (lst_\w+)/.exec(listener.out)?.[1] as string;
      const events = await call('GET', `/events?payment_id=${created[0]}`);
      const eventId = events.body.data[0].id as string;
      await expect
        .poll(async () => (await call('GET', `/events/${eventId}`)).body.data.deliveries, { timeout: 10_000 })
        .toEqual([
          expect.objectContaining({
            url: `cli:${listenerId}`,
            status: 'delivered',
            attempts: [expect.objectContaining({ attempt: 1, url: `${forwardTo}`, status_code: 200 })],
          }),
        ]);
      // A listener's delivery never makes the event failed or delivered (no webhook URL: none).
      expect(events.body.data[0].delivery_status).toBe('none');

      listener.child.kill('SIGINT');
      expect(await exitCode(listener.child)).toBe(0);
      expect(listener.out).toContain('Stopped: 20 event(s) received, 20 answered 2xx, 0 refused or failed.');
    } finally {
      if (listener.child.exitCode === null) listener.child.kill('SIGKILL');
      server.closeAllConnections();
      server.close();
    }
  });

  it('is the local loop with payhook trigger --base-url: the events it makes on the sender arrive through the listener', async () => {
    const { url: forwardTo, handled, close } = await startTriggerReceiver({ businessIds: [BIZ] });
    // Typed without its scheme, as people do: taken as http://, and said so.
    const typed = forwardTo.replace(/^http:\/\//, '');
    const listener = started(
      spawn(process.execPath, [bin, 'listen', '--api-key', key, '--base-url', base, '--forward-to', typed], {
        env: cliEnv(ENV),
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    try {
      await expect.poll(() => listener.out, { timeout: 30_000 }).toContain('Ready!');
      expect(listener.out).toContain(`Forwarding to ${forwardTo} (--forward-to ${typed})\n`);
      expect(listener.out).toContain(`to ${forwardTo}\n`);
      const made = await payhookCli(
        ['trigger', 'payment.session.succeeded', '--base-url', base, '--api-key', key],
        {
          env: ENV,
        },
      );
      expect(made.code, made.stderr).toBe(0);
      expect(made.stdout).toMatch(
        /^Created payment session \S+ \(payment.session.created\)\nCaptured it \(bank account\)\nCompleted it through the sandbox: settled \(payment.session.succeeded\)\n/,
      );
      await expect
        .poll(() => handled, { timeout: 30_000 })
        .toEqual(['payment.session.created', 'payment.session.succeeded']);

      const failed = await payhookCli(
        [
          'trigger',
          'payment.session.failed',
          '--base-url',
          base,
          '--api-key',
          key,
          '--method',
          'card',
          '--json',
        ],
        { env: ENV },
      );
      expect(failed.code, failed.stderr).toBe(0);
      const answer = JSON.parse(failed.stdout);
      expect(answer.events.map((e: { type: string }) => e.type)).toEqual([
        'payment.session.created',
        'payment.session.failed',
      ]);
      expect(answer.calls.map((c: { status: number }) => c.status)).toEqual([201, 200, 200, 200]);
      await expect.poll(() => handled.length, { timeout: 30_000 }).toBe(4);
      // Each event the trigger made is in the listener's output once.
      for (const e of answer.events) expect(listener.out.split(`[${e.id}]`).length - 1).toBe(2);
    } finally {
      listener.child.kill('SIGINT');
      await exitCode(listener.child);
      close();
    }

    // Refusals: a key the sender does not know (1), a live key (2), flags of the other mode (2), no sender (3).
    const unknown = await payhookCli(
      ['trigger', 'payment.session.created', '--base-url', base, '--api-key', 'sk_test_unknown'],
      { env: ENV },
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('the sender refused POST /payment-sessions: 401 unauthorized');
    const live = await payhookCli(
      ['trigger', 'payment.session.created', '--base-url', base, '--api-key', 'sk_live_x'],
      { env: ENV },
    );
    expect(live.code).toBe(2);
    expect(live.stderr).toContain('takes test keys only');
    const mixed = await payhookCli(
      ['trigger', 'payment.session.created', '--base-url', base, '--api-key', key, '--to', base],
      { env: ENV },
    );
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toContain('--to is for sending a signed event straight to a receiver');
    const away = await payhookCli(
      ['trigger', 'payment.session.created', '--base-url', 'http://127.0.0.1:9', '--api-key', key],
      { env: ENV },
    );
    expect(away.code).toBe(3);
    expect(away.stderr).toContain('Could not reach the sender at http://127.0.0.1:9');
  });

  it('keeps running when the local receiver refuses, and reports each refusal', async () => {
    const listener = started(
      spawn(
        process.execPath,
        [bin, 'listen', '--api-key', key, '--base-url', base, '--forward-to', 'http://127.0.0.1:1/webhooks'],
        { env: cliEnv(ENV), stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    );
    try {
      await expect.poll(() => listener.out, { timeout: 30_000 }).toContain('Ready!');
      const payment = await createSession();
      await createSession();
      await expect.poll(() => listener.out.match(/<-- \[ERR\]/g)?.length ?? 0, { timeout: 30_000 }).toBe(2);
      expect(listener.child.exitCode).toBe(null);
      const eventId = (await call('GET', `/events?payment_id=${payment}`)).body.data[0].id as string;
      await expect
        .poll(async () => (await call('GET', `/events/${eventId}`)).body.data.deliveries, { timeout: 10_000 })
        .toEqual([
          expect.objectContaining({
            status: 'failed',
            attempts: [
              expect.objectContaining({
                status_code: null,
                error: expect.objectContaining({ code: expect.any(String) }),
              }),
            ],
          }),
        ]);
      listener.child.kill('SIGTERM');
      expect(await exitCode(listener.child)).toBe(0);
      expect(listener.out).toContain('2 refused or failed');
    } finally {
      if (listener.child.exitCode === null) listener.child.kill('SIGKILL');
    }
  });

  it('exits 1 for a key the sender refuses (as trigger and endpoints do), 3 for a sender it cannot reach, 2 for a live key without --live', async () => {
    const refused = await payhookCli(['listen', '--api-key', 'sk_test_not_a_key', '--base-url', base], {
      env: ENV,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('the sender refused the API key (401 unauthorized)');
    const unreachable = await payhookCli(['listen', '--api-key', key, '--base-url', 'http://127.0.0.1:9'], {
      env: ENV,
    });
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toContain('cannot reach the sender at http://127.0.0.1:9/');
    const live = await payhookCli(['listen', '--api-key', 'sk_live_abc'], { env: ENV });
    expect(live.code).toBe(2);
    expect(live.stderr).toContain('Add --live');
    const missing = await payhookCli(['listen'], { env: ENV });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--api-key (or PAYHOOK_API_KEY) is required');
    // A bare port, with or without a path, is on localhost; the URL is said before anything else.
    for (const [typed, url] of [
      [':4000/webhooks', 'http://localhost:4000/webhooks'],
      ['4000', 'http://localhost:4000/'],
    ]) {
      const run = await payhookCli(
        ['listen', '--api-key', 'sk_test_not_a_key', '--base-url', base, '--forward-to', typed as string],
        { env: ENV },
      );
      expect(run.code).toBe(1);
      expect(run.stdout).toBe(`Forwarding to ${url} (--forward-to ${typed})\n`);
    }
    const ftp = await payhookCli(['listen', '--api-key', key, '--forward-to', 'ftp://host/x'], { env: ENV });
    expect(ftp.code).toBe(2);
    expect(ftp.stderr).toContain('--forward-to must be an http(s) URL');
  });
});
