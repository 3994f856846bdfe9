// @module-tag process
// @module-tag build
import { generateSigningKeyPair, generateSigningSecret, signWebhookV1a } from '@payhook/core';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payhookCli, startTriggerReceiver } from './run-cli.js';

const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const DATA = '{"id":"pay_1","amount":150000,"status":"settled"}';

/** `payhook sign --secret` output: header lines, an empty line, the body and a final newline. */
function splitMessage(text: string): { headers: Record<string, string>; body: string } {
  const [head = '', body = ''] = text.split('\n\n');
  const headers = Object.fromEntries(head.split('\n').map((line) => line.split(': ') as [string, string]));
  return { headers, body: body.replace(/\n$/, '') };
}

describe('payhook sign, verify and trigger with signing secrets', { timeout: 60_000 }, () => {
  const secret = generateSigningSecret();
  const previous = generateSigningSecret();

  it('sign --secret prints the three headers and the body; verify reads them and reports both verdicts', async () => {
    const signed = await payhookCli(['sign', '--business-id', BIZ, '--secret', secret, '--id', 'evt_1'], {
      input: DATA,
    });
    expect(signed).toMatchObject({ code: 0, stderr: '' });
    const { headers, body } = splitMessage(signed.stdout);
    expect(Object.keys(headers)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    expect(headers['webhook-id']).toBe('evt_1');
    expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(JSON.parse(body)).toMatchObject({
      event: 'payment.session.succeeded',
      checksum: expect.any(String),
    });

    const both = await payhookCli(['verify', '--business-id', BIZ, '--secret', secret], {
      input: signed.stdout,
    });
    expect(both.code).toBe(0);
    expect(both.stdout).toContain(`valid: payment.session.succeeded, signed with business id ${BIZ}`);
    expect(both.stdout).toContain('signature valid: webhook-id evt_1');
    const json = JSON.parse(
      (
        await payhookCli(['verify', '--secret', previous, '--secret', secret, '--json'], {
          input: signed.stdout,
        })
      ).stdout,
    );
    expect(json).toEqual({
      ok: true,
      signature: {
        ok: true,
        id: 'evt_1',
        timestamp: Number(headers['webhook-timestamp']),
        scheme: 'v1',
        secretIndex: 1,
        publicKeyIndex: -1,
      },
    });
  });

  it('signs with every secret during a rotation, and the standardwebhooks package verifies the output', async () => {
    const signed = await payhookCli(
      ['sign', '--business-id', BIZ, '--secret', previous, '--secret', secret],
      {
        input: DATA,
      },
    );
    const { headers, body } = splitMessage(signed.stdout);
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    for (const key of [previous, secret]) {
      expect(new StandardWebhook(key).verify(body, headers)).toMatchObject({
        event: 'payment.session.succeeded',
      });
    }
    const asJson = JSON.parse(
      (await payhookCli(['sign', '--business-id', BIZ, '--secret', secret, '--json'], { input: DATA }))
        .stdout,
    );
    expect(new StandardWebhook(secret).verify(asJson.body, asJson.headers)).toMatchObject({
      checksum: expect.any(String),
    });
  });

  it('verifies headers given with -H against what the standardwebhooks package signed', async () => {
    const body = (await payhookCli(['sign', '--business-id', BIZ], { input: DATA })).stdout.trimEnd();
    const now = new Date();
    const signature = new StandardWebhook(secret).sign('msg_2', now, body);
    const timestamp = String(Math.floor(now.getTime() / 1000));
    const args = [
      'verify',
      '--secret',
      secret,
      '-H',
      'webhook-id: msg_2',
      '-H',
      `webhook-timestamp: ${timestamp}`,
    ];
    const run = await payhookCli([...args, '--header', `Webhook-Signature: ${signature}`], { input: body });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('signature valid: webhook-id msg_2');
  });

  it('exits 1 on a wrong secret, a tampered body or a stale timestamp, and explains what was signed', async () => {
    const signed = (
      await payhookCli(['sign', '--business-id', BIZ, '--secret', secret, '--id', 'evt_3'], { input: DATA })
    ).stdout;
    const wrong = await payhookCli(['verify', '--business-id', BIZ, '--secret', previous], { input: signed });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain(`valid: payment.session.succeeded`);
    expect(wrong.stdout).toContain('signature invalid: invalid_signature');
    expect(wrong.stdout).toMatch(/signed: {3}evt_3\.\d+\.\{"event"/);
    expect(wrong.stdout).toContain(`no match  secret #1 (${previous.slice(0, 10)}...)`);
    expect(wrong.stdout).not.toContain(previous);

    const tampered = await payhookCli(['verify', '--secret', secret, '--json'], {
      input: signed.replace('150000', '150001'),
    });
    expect(tampered.code).toBe(1);
    expect(JSON.parse(tampered.stdout)).toMatchObject({
      ok: false,
      signature: { ok: false, error: { code: 'invalid_signature' }, explanation: { ok: false } },
    });

    const old = Math.floor(Date.now() / 1000) - 3600;
    const stale = (
      await payhookCli(['sign', '--business-id', BIZ, '--secret', secret, '--timestamp', String(old)], {
        input: DATA,
      })
    ).stdout;
    const refused = await payhookCli(['verify', '--secret', secret], { input: stale });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('signature invalid: signature_timestamp_out_of_tolerance');
    expect(refused.stdout).toContain('OUTSIDE the tolerance');
    expect(
      (await payhookCli(['verify', '--secret', secret, '--tolerance', '7200'], { input: stale })).code,
    ).toBe(0);

    const missing = await payhookCli(['verify', '--secret', secret], { input: DATA });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain('missing header(s): webhook-id, webhook-timestamp, webhook-signature');
  });

  it('verifies a v1a (Ed25519) signature with --public-key, and explains a key that does not verify it', async () => {
    const pair = generateSigningKeyPair();
    const other = generateSigningKeyPair();
    const signed = signWebhookV1a({ id: 'evt_v1a', body: DATA, secretKeys: [pair.secretKey] });
    const headers = Object.entries(signed).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
    const ok = await payhookCli(
      ['verify', '--public-key', other.publicKey, '--public-key', pair.publicKey, ...headers],
      { input: DATA },
    );
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(ok.stdout).toContain('signature valid: webhook-id evt_v1a');
    expect(ok.stdout).toContain('public key #2 (v1a)');

    const wrong = await payhookCli(['verify', '--public-key', other.publicKey, '--json', ...headers], {
      input: DATA,
    });
    expect(wrong.code).toBe(1);
    expect(JSON.parse(wrong.stdout)).toMatchObject({
      ok: false,
      signature: {
        error: { code: 'invalid_signature' },
        explanation: { ok: false, publicKeys: [{ index: 0, matches: false }] },
      },
    });
    const text = await payhookCli(['verify', '--public-key', other.publicKey, ...headers], { input: DATA });
    expect(text.stdout).toContain(
      `no match  public key #1 (${other.publicKey.slice(0, 9)}...) -> verifies no listed v1a signature`,
    );

    const bad = await payhookCli(['verify', '--public-key', 'whpk_short', ...headers], { input: DATA });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--public-key: ');
  });

  it('answers a malformed secret, timestamp or header with exit 2, never echoing the secret', async () => {
    const short = 'whsec_c2hvcnQ=';
    const bad = await payhookCli(['sign', '--business-id', BIZ, '--secret', short], { input: DATA });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--secret: Invalid signing secret: 5 bytes of key, at least 24 are needed.');
    expect(bad.stderr).not.toContain(short);
    const notBase64 = await payhookCli(['verify', '--secret', 'whsec_***'], { input: DATA });
    expect(notBase64).toMatchObject({ code: 2 });
    expect(notBase64.stderr).toContain('is not base64');
    const stamp = await payhookCli(['sign', '--business-id', BIZ, '--secret', secret, '--timestamp', 'soon']);
    expect(stamp.code).toBe(2);
    expect(stamp.stderr).toContain('--timestamp must be whole seconds');
    const alone = await payhookCli(['sign', '--business-id', BIZ, '--id', 'evt_1'], { input: DATA });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--id and --timestamp go with --secret');
    const header = await payhookCli(['verify', '--secret', secret, '-H', 'no colon'], { input: DATA });
    expect(header.code).toBe(2);
    expect(header.stderr).toContain('Not a header line');
    const nothing = await payhookCli(['verify'], { input: DATA });
    expect(nothing.stderr).toContain('--business-id, --secret or --public-key is required');
  });

  describe('trigger --secret', () => {
    let target: Awaited<ReturnType<typeof startTriggerReceiver>>;
    beforeAll(async () => {
      target = await startTriggerReceiver({
        businessIds: [BIZ],
        signingSecrets: [secret],
      });
    });
    afterAll(() => target?.close());

    it('sends the signature headers a receiver that requires them accepts', async () => {
      const base = ['trigger', 'payment.session.succeeded', '--to', target.url, '--business-id', BIZ];
      const unsigned = await payhookCli(base);
      expect(unsigned.code).toBe(1);
      expect(unsigned.stdout).toContain('signature_required');
      const forged = await payhookCli([...base, '--secret', previous]);
      expect(forged.code).toBe(1);
      expect(forged.stdout).toContain('invalid_signature');
      const signed = await payhookCli([...base, '--secret', previous, '--secret', secret, '--json']);
      expect(signed.code).toBe(0);
      const parsed = JSON.parse(signed.stdout);
      expect(parsed).toMatchObject({ status: 200, headers: { 'webhook-id': expect.any(String) } });
      expect(parsed.headers['webhook-signature'].split(' ')).toHaveLength(2);
      await expect.poll(() => target.handled).toEqual(['payment.session.succeeded']);
    });
  });
});
