// @module-tag process
// @module-tag build
// @module-tag pglite
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import { exitCode, startServe } from './run-cli.js';

const BIZ = 'e5c3a2f4-7d8b-4e9f-a0b1-2c3d4e5f6a7b';

let receiverUrl: string;
let answers = 0;
const receiver = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    // Every other request is refused, so both kinds of line show.
    answers++;
    response.writeHead(answers % 2 === 1 ? 200 : 503).end();
  });
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

/** Starts `payhook serve` with `format`, registers the receiver, makes two events; returns what it printed. */
async function attemptsPrinted(format: 'pretty' | 'json'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-attempts-'));
  await copyPgliteTemplate(join(dir, 'data'));
  const serve = await startServe(
    join(dir, 'data'),
    BIZ,
    ['--allow-private-webhooks', '--log-format', format],
    {
      NO_COLOR: '1',
      LOG_LEVEL: 'warn',
    },
  );
  const url = format === 'json' ? serve.url : (/listening on (http:\/\/\S+)/.exec(serve.out)?.[1] as string);
  const apiKey = format === 'json' ? serve.apiKey : (/API key:\s+(\S+)/.exec(serve.out)?.[1] as string);
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
    await expect
      .poll(() => serve.out.split(receiverUrl).length - 1, { timeout: 30_000 })
      .toBeGreaterThanOrEqual(2);
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
    expect(out).not.toContain('{"level"');
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
    expect(attempts.map((a) => a.status_code).sort()).toEqual(expect.arrayContaining([200, 503]));
  });
});
