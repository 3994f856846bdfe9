// @module-tag process
// @module-tag build
// @module-tag pglite
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReceiver, readRawBody, silentLogger } from '@payhook/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import { exitCode, startServe } from './run-cli.js';

const BIZ = 'e5c3a2f4-7d8b-4e9f-a0b1-2c3d4e5f6a7b';

let receiverUrl: string;
let answers = 0;
// A payhook receiver that cannot see the client's address (as a Next.js route with no proxy in
// front): it refuses with 500 client_address_unknown, which the attempt line names with its fix.
const blind = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1'], logger: silentLogger });
const receiver = createServer((request, response) => {
  // Every third request is accepted, refused with 503, or answered by the blind receiver, so
  // each kind of line shows: the events' first attempts, then the 503's retry.
  answers++;
  if (answers % 3 === 0) {
    void blind
      .handle({
        method: request.method ?? 'POST',
        contentType: request.headers['content-type'],
        remoteAddress: undefined, // a platform without sockets, and no getClientAddress
        headers: request.headers,
        readBody: (maxBytes) => readRawBody(request, maxBytes),
      })
      .then((result) => {
        response.writeHead(result.status, { 'content-type': 'application/json', ...result.headers });
        response.end(JSON.stringify(result.body));
      });
    return;
  }
  request.resume();
  request.on('end', () => response.writeHead(answers % 3 === 1 ? 200 : 503).end());
});

beforeAll(async () => {
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`;
});
afterAll(() => {
  receiver.closeAllConnections();
  receiver.close();
});

/** Starts `payhook serve` with `format`, registers the receiver, makes two events; returns what it printed once three attempts were. */
async function attemptsPrinted(format: 'pretty' | 'json', env: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-attempts-'));
  await copyPgliteTemplate(join(dir, 'data'));
  const serve = await startServe(
    join(dir, 'data'),
    BIZ,
    ['--allow-private-webhooks', '--log-format', format],
    {
      NO_COLOR: '1',
      LOG_LEVEL: 'warn',
      ...env,
    },
  );
  const url = format === 'json' ? serve.url : (/listening on (http:\/\/\S+)/.exec(serve.out)?.[1] as string);
  const apiKey = format === 'json' ? serve.apiKey : (/API key:\s+(\S+)/.exec(serve.out)?.[1] as string);
  // An attempt's line, not the sender's own warning about the same URL.
  const attemptLine = format === 'json' ? /"delivery attempt"/ : / [✓✗] /;
  try {
    const call = (method: string, path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: [receiverUrl] })).status).toBe(200);
    for (let i = 0; i < 2; i++)
      expect((await call('POST', '/payment-sessions', sessionRequest)).status).toBe(201);
    // The two first attempts, then the 503's retry (5 s later), which the blind receiver answers.
    await expect
      .poll(() => serve.out.split('\n').filter((line) => attemptLine.test(line)).length, { timeout: 30_000 })
      .toBeGreaterThanOrEqual(3);
    return serve.out;
  } finally {
    serve.child.kill('SIGTERM');
    await exitCode(serve.child);
    await rm(dir, { recursive: true, force: true });
  }
}

describe('payhook serve: one line per delivery attempt', { timeout: 300_000 }, () => {
  it('prints the dashboard URL, then each attempt readably: outcome, latency, event, URL, event id', async () => {
    const out = await attemptsPrinted('pretty');
    expect(out).toMatch(/ {2}Dashboard: http:\/\/127\.0\.0\.1:\d+\/dashboard \(sign in with an API key\)\n/);
    const lines = out.split('\n').filter((line) => line.includes(receiverUrl));
    expect(
      lines.some((l) => /^\d\d:\d\d:\d\d {2}✓ 200 {2}\d+ ms {2}payment\.session\.created {2}/.test(l)),
    ).toBe(true);
    expect(
      lines.some((l) =>
        /✗ 503 {2}\d+ ms {2}payment\.session\.created .+\[[\da-f-]{36}\] {2}\(will retry\)$/.test(l),
      ),
    ).toBe(true);
    // The refusal names the receiver's error code and the fix, on the attempt's own line.
    expect(
      lines.some((l) =>
        /✗ 500 client_address_unknown {2}\d+ ms {2}payment\.session\.created .+\(will retry\) {2}the receiver cannot see this sender's address \(client_address_unknown\): give its handler getClientAddress .+allowAnyIp: true/.test(
          l,
        ),
      ),
    ).toBe(true);
    expect(out).not.toContain('{"level"');
  });

  it('prints one line per API call, not the request and its answer apart', async () => {
    const out = await attemptsPrinted('pretty', { LOG_LEVEL: 'info' });
    const calls = out.split('\n').filter((line) => line.includes('/accounts/settings'));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatch(/^\d\d:\d\d:\d\d {2}INFO {3}PATCH \/accounts\/settings {2}200 {2}\d+ ms$/);
    expect(out).not.toContain('incoming request');
  });

  it('prints each attempt as a JSON line when asked', async () => {
    const out = await attemptsPrinted('json');
    const attempts = out
      .split('\n')
      .filter((line) => line.includes('"delivery attempt"'))
      .map((line) => JSON.parse(line));
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts[0]).toMatchObject({
      level: 30,
      msg: 'delivery attempt',
      event: 'payment.session.created',
      event_id: expect.stringMatching(/^[\da-f-]{36}$/),
      url: receiverUrl,
      attempt: 1,
      latency_ms: expect.any(Number),
    });
    expect(attempts.map((a) => a.status_code).sort()).toEqual(expect.arrayContaining([200, 503, 500]));
    expect(attempts.find((a) => a.status_code === 500)).toMatchObject({
      receiver_code: 'client_address_unknown',
      hint: expect.stringContaining('getClientAddress'),
    });
  });
});
