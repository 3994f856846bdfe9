import {
  createReceiver,
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  explainChecksumMismatch,
  formatMismatch,
  generateSigningSecret,
  parseSigningSecret,
  readSignatureHeaders,
  signWebhook,
  verifyWebhookSignature,
} from '@payhook/core';
import { createTestEvent, createTestRequest } from '@payhook/core/testing';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';

// The example of the Standard Webhooks specification and Svix's documentation.
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};
const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const SECRET = generateSigningSecret();
const OTHER = generateSigningSecret();
const at = (seconds: number) => seconds * 1000;

const received = (headers: Record<string, string>) => readSignatureHeaders(headers);

describe('signing secrets', () => {
  it('reads whsec_ and base64 (padded or not) into key bytes', () => {
    expect(parseSigningSecret(VECTOR.secret).key).toHaveLength(24);
    const padded = `whsec_${Buffer.alloc(25, 7).toString('base64')}`;
    expect(padded.endsWith('=')).toBe(true);
    expect(parseSigningSecret(padded).key).toEqual(Buffer.alloc(25, 7));
    expect(parseSigningSecret(padded.replace(/=+$/, '')).key).toEqual(Buffer.alloc(25, 7));
  });

  it('refuses a missing prefix, non-base64, a short key or a non-string, never echoing the secret', () => {
    const cases: [unknown, RegExp][] = [
      [VECTOR.secret.slice(6), /expected "whsec_" followed by base64/],
      ['whsec_abc$def', /is not base64/],
      ['whsec_abcde', /is not base64/],
      [`whsec_${Buffer.alloc(23).toString('base64')}`, /23 bytes of key, at least 24/],
      [42, /expected "whsec_"/],
    ];
    for (const [secret, message] of cases) {
      let error: unknown;
      try {
        parseSigningSecret(secret as string);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toMatch(message);
      if (typeof secret === 'string' && secret.length > 8)
        expect((error as Error).message).not.toContain(secret);
    }
  });

  it('generates 32 random bytes by default, never fewer than 24', () => {
    const secrets = new Set(Array.from({ length: 50 }, () => generateSigningSecret()));
    expect(secrets.size).toBe(50);
    for (const secret of secrets) expect(parseSigningSecret(secret).key).toHaveLength(32);
    expect(parseSigningSecret(generateSigningSecret(48)).key).toHaveLength(48);
    expect(() => generateSigningSecret(16)).toThrow(/at least 24 bytes/);
  });
});

describe('signWebhook', () => {
  it('gives the specification example signature', () => {
    const headers = signWebhook({
      id: VECTOR.id,
      body: VECTOR.body,
      secrets: [VECTOR.secret],
      timestamp: VECTOR.timestamp,
    });
    expect(headers).toEqual({
      'webhook-id': VECTOR.id,
      'webhook-timestamp': String(VECTOR.timestamp),
      'webhook-signature': VECTOR.signature,
    });
  });

  it('signs bytes as their text, lists one signature per secret, and stamps the current second', () => {
    const body = '{"event":"payment.session.succeeded","data":{"note":"café ✓"}}';
    const asText = signWebhook({ id: 'evt_1', body, secrets: [SECRET], timestamp: 1 });
    const asBytes = signWebhook({
      id: 'evt_1',
      body: new TextEncoder().encode(body),
      secrets: [SECRET],
      timestamp: 1,
    });
    expect(asBytes).toEqual(asText);
    const both = signWebhook({
      id: 'evt_1',
      body,
      secrets: [OTHER, parseSigningSecret(SECRET)],
      timestamp: 1,
    });
    expect(both['webhook-signature'].split(' ')).toEqual([
      expect.stringMatching(/^v1,/),
      asText['webhook-signature'],
    ]);
    const before = Math.floor(Date.now() / 1000);
    const stamped = Number(signWebhook({ id: 'evt_1', body, secrets: [SECRET] })['webhook-timestamp']);
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stamped).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
  });

  it('refuses an empty id, no secret, a bad secret or a timestamp that is not whole seconds', () => {
    expect(() => signWebhook({ id: '', body: '{}', secrets: [SECRET] })).toThrow(/Invalid webhook id/);
    expect(() => signWebhook({ id: 'e', body: '{}', secrets: [] })).toThrow(/at least one secret/);
    expect(() => signWebhook({ id: 'e', body: '{}', secrets: ['whsec_x'] })).toThrow(TypeError);
    for (const timestamp of [1.5, -1, Number.NaN, 1e13]) {
      expect(() => signWebhook({ id: 'e', body: '{}', secrets: [SECRET], timestamp })).toThrow(
        /Invalid timestamp/,
      );
    }
  });
});

describe('verifyWebhookSignature', () => {
  const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
  const signed = (overrides: { secrets?: string[]; timestamp?: number; id?: string } = {}) =>
    signWebhook({
      id: overrides.id ?? 'evt_1',
      body,
      secrets: overrides.secrets ?? [SECRET],
      timestamp: overrides.timestamp ?? 1_800_000_000,
    });
  const options = { secrets: [SECRET], now: at(1_800_000_000) };

  it('accepts its own signature and says which secret matched', () => {
    expect(verifyWebhookSignature(received(signed()), body, options)).toEqual({
      ok: true,
      id: 'evt_1',
      timestamp: 1_800_000_000,
      scheme: 'v1',
      secretIndex: 0,
      publicKeyIndex: -1,
    });
    const rotated = verifyWebhookSignature(received(signed()), body, {
      ...options,
      secrets: [OTHER, SECRET],
    });
    expect(rotated).toMatchObject({ ok: true, secretIndex: 1 });
    const listingBoth = received(signed({ secrets: [OTHER, SECRET] }));
    expect(verifyWebhookSignature(listingBoth, body, options)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(verifyWebhookSignature(listingBoth, body, { ...options, secrets: [OTHER] })).toMatchObject({
      ok: true,
    });
  });

  it('accepts a timestamp exactly at the tolerance either way and refuses one second more', () => {
    const t = DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
    for (const skew of [-t, t]) {
      expect(
        verifyWebhookSignature(received(signed({ timestamp: 1_800_000_000 + skew })), body, options).ok,
      ).toBe(true);
    }
    for (const skew of [-t - 1, t + 1, -86_400 * 365]) {
      const result = verifyWebhookSignature(
        received(signed({ timestamp: 1_800_000_000 + skew })),
        body,
        options,
      );
      expect(result).toMatchObject({
        ok: false,
        error: { code: 'signature_timestamp_out_of_tolerance', status: 401 },
      });
    }
    const wide = { ...options, toleranceSeconds: 3600 };
    expect(verifyWebhookSignature(received(signed({ timestamp: 1_800_000_000 - 3600 })), body, wide).ok).toBe(
      true,
    );
  });

  it('refuses any change to the body, the id or the timestamp, and a signature by another secret', () => {
    const headers = signed();
    const cases: [Record<string, string>, string][] = [
      [headers, body.replace('"settled"', '"failed" ')],
      [headers, `${body} `],
      [{ ...headers, 'webhook-id': 'evt_2' }, body],
      [{ ...headers, 'webhook-timestamp': '1800000001' }, body],
      [signed({ secrets: [OTHER] }), body],
    ];
    for (const [h, b] of cases) {
      expect(verifyWebhookSignature(received(h), b, options)).toMatchObject({
        ok: false,
        error: {
          code: 'invalid_signature',
          message: 'No webhook-signature matches a configured signing secret.',
        },
      });
    }
  });

  it('refuses incomplete and malformed headers with invalid_signature, never throwing', () => {
    const good = signed();
    const digest = good['webhook-signature'].slice(3);
    const malformed: Record<string, string>[] = [
      { 'webhook-id': 'evt_1', 'webhook-timestamp': '1800000000' },
      { 'webhook-timestamp': '1800000000', 'webhook-signature': good['webhook-signature'] },
      { ...good, 'webhook-timestamp': '1800000000.5' },
      { ...good, 'webhook-timestamp': '-1800000000' },
      { ...good, 'webhook-timestamp': '0x6B49D200' },
      { ...good, 'webhook-timestamp': '1'.repeat(400) },
      { ...good, 'webhook-signature': `v2,${digest}` },
      { ...good, 'webhook-signature': digest },
      { ...good, 'webhook-signature': 'v1,' },
      { ...good, 'webhook-signature': `v1,${digest.slice(0, 20)}` },
      { ...good, 'webhook-signature': 'v1,@@@@ v1a,x ,,, v1' },
      { ...good, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` },
    ];
    for (const headers of malformed) {
      const result = verifyWebhookSignature(received(headers), body, options);
      expect(result.ok, JSON.stringify(headers)).toBe(false);
      if (!result.ok) expect(result.error.code).toBe('invalid_signature');
    }
  });

  it('reads the listed signatures among unknown versions, and at most 16 of them', () => {
    const good = signed()['webhook-signature'];
    const decoy = signed({ secrets: [OTHER] })['webhook-signature'];
    const mixed = `v1a,abc v2,${good.slice(3)} ${good}`;
    expect(
      verifyWebhookSignature(received({ ...signed(), 'webhook-signature': mixed }), body, options).ok,
    ).toBe(true);
    const late = `${Array(16).fill(decoy).join(' ')} ${good}`;
    expect(
      verifyWebhookSignature(received({ ...signed(), 'webhook-signature': late }), body, options).ok,
    ).toBe(false);
    const early = `${Array(15).fill(decoy).join(' ')} ${good}`;
    expect(
      verifyWebhookSignature(received({ ...signed(), 'webhook-signature': early }), body, options).ok,
    ).toBe(true);
    // Signatures are decoded into buffers kept between calls: one call's never counts in the next.
    expect(
      verifyWebhookSignature(received({ ...signed(), 'webhook-signature': decoy }), body, options).ok,
    ).toBe(false);
    // Base64 without its padding reads as the same bytes.
    const unpadded = good.replace(/=+$/, '');
    expect(
      verifyWebhookSignature(received({ ...signed(), 'webhook-signature': unpadded }), body, options).ok,
    ).toBe(true);
  });

  it('reads the svix- names, and joins a header given twice', () => {
    const h = signed({ secrets: [OTHER] });
    const svix = {
      'svix-id': h['webhook-id'],
      'svix-timestamp': h['webhook-timestamp'],
      'svix-signature': h['webhook-signature'],
    };
    expect(
      verifyWebhookSignature(readSignatureHeaders(svix), body, { ...options, secrets: [OTHER] }).ok,
    ).toBe(true);
    const twice = readSignatureHeaders({
      ...signed(),
      'webhook-signature': ['v1,AAAA', signed()['webhook-signature']],
    });
    expect(verifyWebhookSignature(twice, body, options).ok).toBe(true);
  });
});

describe('interop with the standardwebhooks and svix packages', () => {
  const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));

  it('they verify what payhook signs, with one secret or during a rotation', () => {
    for (const secrets of [[SECRET], [OTHER, SECRET]]) {
      const headers = signWebhook({ id: 'evt_interop', body, secrets });
      expect(new StandardWebhook(SECRET).verify(body, headers)).toEqual(JSON.parse(body));
      expect(new SvixWebhook(SECRET).verify(body, { ...headers })).toEqual(JSON.parse(body));
      const svixNames = {
        'svix-id': headers['webhook-id'],
        'svix-timestamp': headers['webhook-timestamp'],
        'svix-signature': headers['webhook-signature'],
      };
      expect(new SvixWebhook(SECRET).verify(body, svixNames)).toEqual(JSON.parse(body));
    }
    const stranger = signWebhook({ id: 'evt_interop', body, secrets: [OTHER] });
    expect(() => new StandardWebhook(SECRET).verify(body, stranger)).toThrow();
    expect(() => new SvixWebhook(SECRET).verify(body, { ...stranger })).toThrow();
  });

  it('payhook verifies what they sign, and refuses it once tampered', () => {
    const now = new Date();
    const seconds = String(Math.floor(now.getTime() / 1000));
    for (const library of [new StandardWebhook(SECRET), new SvixWebhook(SECRET)]) {
      const headers = {
        'webhook-id': 'msg_1',
        'webhook-timestamp': seconds,
        'webhook-signature': library.sign('msg_1', now, body),
      };
      expect(verifyWebhookSignature(received(headers), body, { secrets: [SECRET] })).toMatchObject({
        ok: true,
        id: 'msg_1',
      });
      expect(verifyWebhookSignature(received(headers), Buffer.from(body), { secrets: [SECRET] }).ok).toBe(
        true,
      );
      expect(
        verifyWebhookSignature(received(headers), body.replace('settled', 'Settled'), { secrets: [SECRET] })
          .ok,
      ).toBe(false);
    }
  });

  it('a receiver takes an event the standardwebhooks package signed, and explains one it did not', async () => {
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      signingSecrets: [SECRET],
      requireSignature: true,
      recoveryIntervalMs: 0,
    });
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    const now = new Date();
    const headers = {
      'content-type': 'application/json',
      'webhook-id': 'msg_2',
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new StandardWebhook(SECRET).sign('msg_2', now, body),
    };
    const request = {
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      headers,
      rawBody: body,
    };
    const result = await receiver.handle(request);
    expect(result.status).toBe(200);
    await result.afterResponse?.();
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);

    const forged = { ...headers, 'webhook-signature': new StandardWebhook(OTHER).sign('msg_2', now, body) };
    const refused = await receiver.handle({ ...request, headers: forged });
    expect(refused).toMatchObject({ status: 401, body: { error: { code: 'invalid_signature' } } });
    const explanation = explainChecksumMismatch(
      { rawBody: body },
      { businessIds: [BIZ], signature: { headers: forged, secrets: [SECRET] } },
    );
    expect(explanation).toMatchObject({ ok: false, signature: { ok: false, withinTolerance: true } });
    expect(explanation.signature?.signedContent).toBe(
      `msg_2.${headers['webhook-timestamp']}.${body.slice(0, 120)}...`,
    );
    expect(explanation.signature?.secrets).toEqual([
      expect.objectContaining({ index: 0, secretPrefix: `${SECRET.slice(0, 10)}...`, matches: false }),
    ]);
    const text = formatMismatch(explanation);
    expect(text).toContain('The signature does not verify.');
    expect(text).toContain(`listed:   ${forged['webhook-signature']}`);
    expect(text).not.toContain(SECRET);
    await receiver.close();
  });

  it('createTestRequest signs with both proofs', () => {
    const { body: text, headers } = createTestRequest(createTestEvent('payment.session.created', BIZ), {
      secrets: [SECRET],
      id: 'evt_t',
    });
    expect(headers).toMatchObject({ 'content-type': 'application/json', 'webhook-id': 'evt_t' });
    expect(new StandardWebhook(SECRET).verify(text, headers as Record<string, string>)).toMatchObject({
      event: 'payment.session.created',
    });
    expect(createTestRequest('{}').headers).toEqual({ 'content-type': 'application/json' });
  });
});
