// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  createReceiver,
  generateSigningSecret,
  readSignatureHeaders,
  silentLogger,
  verifyChecksum,
  verifyWebhookSignature,
} from '@payhook/core';
import { afterAll, describe, expect, it } from 'vitest';
import { ADAPTER_APPS } from './support/adapter-apps.js';
import { freePort } from './support/free-port.js';

// `payhook check` (the built command, as a merchant runs it) against payhook's own receivers on
// every adapter, which must pass every case, and against receivers written wrong on purpose,
// each caught by the case that looks for its mistake.

const BIZ = 'biz_check_e2e';
const CLI = fileURLToPath(new URL('../packages/cli/dist/cli.js', import.meta.url));
const run = promisify(execFile);

interface Report {
  passed: boolean;
  cases: { name: string; ok: boolean; status: number | null; code: string | null; detail: string }[];
}

async function check(
  url: string,
  ...flags: string[]
): Promise<{ code: number; report?: Report; stdout: string; stderr: string }> {
  const args = [CLI, 'check', url, '--business-id', BIZ, ...flags];
  const { code, stdout, stderr } = await run(process.execPath, args, {
    env: { ...process.env, NO_COLOR: '1' },
  }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
  return {
    code,
    stdout,
    stderr,
    ...(flags.includes('--json') ? { report: JSON.parse(stdout) as Report } : {}),
  };
}

const failing = (report: Report | undefined) => report?.cases.filter((c) => !c.ok).map((c) => c.name);

/** A plain node:http receiver answering what `answer` decides for each body (written wrong on purpose). */
const closers: (() => Promise<void>)[] = [];
async function plainReceiver(
  answer: (body: string, headers: IncomingHttpHeaders) => number | Promise<number>,
): Promise<string> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      res.statusCode = await answer(body, req.headers);
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

/** The checksum verdict of a correct receiver. */
const verdict = (body: string) => {
  try {
    JSON.parse(body);
  } catch {
    return 400;
  }
  return verifyChecksum({ rawBody: body }, { businessIds: [BIZ] }).ok ? 200 : 401;
};

afterAll(async () => {
  for (const close of closers) await close();
});

describe('payhook check', { timeout: 60_000 }, () => {
  it.each(ADAPTER_APPS.map((a) => [a.name, a] as const))(
    'passes every case against payhook on %s',
    async (_, adapter) => {
      const app = await adapter.start(
        createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1', '::1'] }),
      );
      closers.push(() => app.close());
      const result = await check(`${app.url}/webhooks`, '--json');
      expect(failing(result.report)).toEqual([]);
      expect(result.report?.cases).toHaveLength(8);
      expect(result.code).toBe(0);
    },
  );

  // The quickstarts' and `payhook init`'s receiver: a signing secret, and nothing else about
  // signatures (a receiver with a secret requires them by default).
  it.each(ADAPTER_APPS.map((a) => [a.name, a] as const))(
    'passes every case, the signature ones included, against the quickstart receiver on %s',
    async (_, adapter) => {
      const secret = generateSigningSecret();
      const app = await adapter.start(
        createReceiver({
          businessIds: [BIZ],
          signingSecrets: [secret],
          allowedIps: ['127.0.0.1', '::1'],
          logger: silentLogger,
        }),
      );
      closers.push(() => app.close());
      const result = await check(`${app.url}/webhooks`, '--secret', secret, '--json');
      expect(failing(result.report)).toEqual([]);
      expect(result.report?.cases).toHaveLength(11);
      expect(result.code).toBe(0);
    },
  );

  it('fails only the missing signature against payhook with allowUnsigned: true', async () => {
    const secret = generateSigningSecret();
    const app = await ADAPTER_APPS[0]?.start(
      createReceiver({
        businessIds: [BIZ],
        signingSecrets: [secret],
        allowUnsigned: true,
        allowedIps: ['127.0.0.1', '::1'],
        logger: silentLogger,
      }),
    );
    if (!app) throw new Error('no adapter');
    closers.push(() => app.close());
    const result = await check(`${app.url}/webhooks`, '--secret', secret, '--json');
    expect(failing(result.report)).toEqual(['missing signature']);
    expect(result.code).toBe(1);
  });

  it('passes every case, the signature ones included, against payhook with a signing secret; prints a line per case', async () => {
    const secret = generateSigningSecret();
    const app = await ADAPTER_APPS[0]?.start(
      createReceiver({
        businessIds: [BIZ],
        allowedIps: ['127.0.0.1', '::1'],
        signingSecrets: [secret],
      }),
    );
    if (!app) throw new Error('no adapter');
    closers.push(() => app.close());
    const result = await check(`${app.url}/webhooks`, '--secret', secret);
    expect(result.code, result.stdout).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines).toHaveLength(12);
    expect(lines[0]).toMatch(/^PASS {2}valid event +expected 200, got 200 \(\d+ ms\)$/);
    expect(lines[2]).toMatch(/^PASS {2}forged checksum +expected a 4xx refusal, got 401 \(\d+ ms\)$/);
    expect(lines.at(-1)).toBe('11 of 11 cases pass.');
  });

  it("names the receiver's error code on a case it refused: a receiver that requires signatures, checked without --secret", async () => {
    const app = await ADAPTER_APPS[0]?.start(
      createReceiver({
        businessIds: [BIZ],
        signingSecrets: [generateSigningSecret()],
        allowedIps: ['127.0.0.1', '::1'],
        logger: silentLogger,
      }),
    );
    if (!app) throw new Error('no adapter');
    closers.push(() => app.close());
    const result = await check(`${app.url}/webhooks`, '--json');
    expect(result.code).toBe(1);
    expect(result.report?.cases[0]).toMatchObject({
      name: 'valid event',
      ok: false,
      status: 401,
      code: 'signature_required',
    });
    const text = await check(`${app.url}/webhooks`);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toMatch(
      /^FAIL {2}valid event +expected 200, got 401 signature_required \(\d+ ms\): the receiver refused an authentic event/,
    );
    // A refusal that passes keeps its line short.
    expect(lines[2]).toMatch(/^PASS {2}forged checksum +expected a 4xx refusal, got 401 \(\d+ ms\)$/);
  });

  it('catches a receiver that verifies nothing', async () => {
    const url = await plainReceiver(() => 200);
    const result = await check(url, '--json');
    expect(result.code).toBe(1);
    expect(failing(result.report)).toEqual([
      'forged checksum',
      'checksum of another business',
      'tampered field',
      'malformed JSON',
    ]);
    const text = await check(url);
    expect(text.stdout).toContain('FAIL  forged checksum               expected a 4xx refusal, got 200');
    expect(text.stdout).toContain('the receiver accepted an event whose checksum is wrong');
    expect(text.stdout).toContain('4 of 8 cases pass.');
  });

  it('catches 409 on a duplicate, a 500 on malformed JSON, and hashing the raw bytes', async () => {
    const seen = new Set<string>();
    const conflict = await plainReceiver((body) => {
      const status = verdict(body);
      if (status !== 200) return status;
      if (seen.has(body)) return 409;
      seen.add(body);
      return 200;
    });
    expect(failing((await check(conflict, '--json')).report)).toEqual(['duplicate delivery']);

    const crashes = await plainReceiver((body) => (verdict(body) === 400 ? 500 : verdict(body)));
    const crashed = await check(crashes, '--json');
    expect(failing(crashed.report)).toEqual(['malformed JSON']);
    expect(crashed.report?.cases.at(-1)?.detail).toContain('a 5xx makes the sender retry this for 48 hours');

    // The checksum over `data` as it came (JSON.stringify of the parsed value keeps its key order).
    const naive = await plainReceiver((body) => {
      if (verdict(body) === 400) return 400;
      const { event, data, checksum } = JSON.parse(body);
      const expected = createHmac('sha256', BIZ)
        .update(`${event}|${JSON.stringify(data)}`)
        .digest('hex');
      return expected === checksum ? 200 : 401;
    });
    expect(failing((await check(naive, '--json')).report)).toEqual(['other key order, spaces, \\/']);
  });

  it('catches a receiver that ignores the signature timestamp, or the signature altogether', async () => {
    const secret = generateSigningSecret();
    const noClock = await plainReceiver((body, headers) => {
      const status = verdict(body);
      if (status !== 200) return status;
      const signature = verifyWebhookSignature(readSignatureHeaders(headers), body, {
        secrets: [secret],
        toleranceSeconds: 1e9,
      });
      return signature.ok ? 200 : 401;
    });
    expect(failing((await check(noClock, '--secret', secret, '--json')).report)).toEqual([
      'stale signature (10 min)',
    ]);
    const checksumOnly = await plainReceiver((body) => verdict(body));
    expect(failing((await check(checksumOnly, '--secret', secret, '--json')).report)).toEqual([
      'stale signature (10 min)',
      'signature with another secret',
      'missing signature',
    ]);
  });

  it('fails a slow receiver, and exits 3 when nothing listens', async () => {
    const slow = await plainReceiver(async (body) => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      return verdict(body);
    });
    const result = await check(slow, '--timeout', '300', '--json');
    expect(result.code).toBe(1);
    expect(result.report?.cases.every((c) => !c.ok && c.status === null)).toBe(true);
    expect(result.report?.cases[0]?.detail).toContain('no answer within 300 ms');

    const closed = `http://127.0.0.1:${await freePort()}/webhooks`;
    const nobody = await check(closed);
    expect(nobody.code).toBe(3);
    expect(nobody.stderr).toContain(`cannot reach ${closed}: ECONNREFUSED`);
    const usage = await check('not a url');
    expect(usage.code).toBe(2);
  });
});
