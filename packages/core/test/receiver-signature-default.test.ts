import {
  createReceiver,
  generateSigningKeyPair,
  generateSigningSecret,
  type Logger,
  type ReceiverOptions,
} from '@payhook/core';
import { createTestEvent, createTestRequest } from '@payhook/core/testing';
import { describe, expect, it } from 'vitest';

// Secure by default: a receiver given signing secrets or public keys refuses an event without a
// signature unless it opts out with allowUnsigned (docs/decisions.md, "Receivers: require a
// signature once they can verify one").
const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const SECRET = generateSigningSecret();
const PAIR = generateSigningKeyPair();

/** A logger that keeps every warning's message. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = () => {};
  return { warnings, debug: noop, info: noop, error: noop, warn: (_obj, msg) => warnings.push(msg ?? '') };
}

/** Creates a receiver with `options`, sends it one request, and says what it answered and ran. */
async function deliver(options: Partial<ReceiverOptions>, signWith: string[] = []) {
  const logger = recordingLogger();
  const receiver = createReceiver({
    businessIds: [BIZ],
    allowAnyIp: true,
    recoveryIntervalMs: 0,
    logger,
    ...options,
  });
  const warnedAtStart = [...logger.warnings];
  const handled: string[] = [];
  receiver.onAny((event) => {
    handled.push(event.event);
  });
  const { body, headers } = createTestRequest(createTestEvent('payment.session.succeeded', BIZ), {
    secrets: signWith,
  });
  const result = await receiver.handle({
    method: 'POST',
    contentType: 'application/json',
    remoteAddress: '127.0.0.1',
    headers,
    rawBody: body,
  });
  await result.afterResponse?.();
  await receiver.idle();
  await receiver.close();
  const error = (result.body as { error?: { code: string; message: string } }).error;
  return { status: result.status, error, handled, warnedAtStart };
}

describe('a receiver with signing keys requires a signature by default', () => {
  for (const [name, keys] of [
    ['signingSecrets', { signingSecrets: [SECRET] }],
    ['signingPublicKeys', { signingPublicKeys: [PAIR.publicKey] }],
  ] as const) {
    it(`refuses an unsigned event with ${name} (401 signature_required), naming the options`, async () => {
      const { status, error, handled, warnedAtStart } = await deliver(keys);
      expect(status).toBe(401);
      expect(error?.code).toBe('signature_required');
      expect(error?.message).toContain('signingSecrets');
      expect(error?.message).toContain('allowUnsigned: true');
      expect(handled).toEqual([]);
      expect(warnedAtStart).toEqual([]);
    });
  }

  it('accepts an event with a valid signature, without a warning at start', async () => {
    const result = await deliver({ signingSecrets: [SECRET] }, [SECRET]);
    expect(result).toMatchObject({ status: 200, handled: ['payment.session.succeeded'], warnedAtStart: [] });
  });

  it('accepts an unsigned event with allowUnsigned: true, and warns once at creation', async () => {
    const result = await deliver({ signingSecrets: [SECRET], allowUnsigned: true });
    expect(result).toMatchObject({ status: 200, handled: ['payment.session.succeeded'] });
    expect(result.warnedAtStart).toHaveLength(1);
    expect(result.warnedAtStart[0]).toMatch(/allowUnsigned: true: events without a signature are accepted/);
    expect(result.warnedAtStart[0]).toContain('signature_required');
    // A signature, when there is one, is still verified.
    const forged = await deliver({ signingSecrets: [SECRET], allowUnsigned: true }, [
      generateSigningSecret(),
    ]);
    expect(forged).toMatchObject({ status: 401, error: { code: 'invalid_signature' }, handled: [] });
  });

  it('takes the older requireSignature: false as allowUnsigned: true, warning that it is deprecated', async () => {
    const result = await deliver({ signingSecrets: [SECRET], requireSignature: false });
    expect(result).toMatchObject({ status: 200, handled: ['payment.session.succeeded'] });
    expect(result.warnedAtStart).toHaveLength(1);
    expect(result.warnedAtStart[0]).toContain(
      'requireSignature: false (deprecated: write allowUnsigned: true)',
    );
  });

  it('still takes requireSignature: true, which restates the default', async () => {
    const result = await deliver({ signingSecrets: [SECRET], requireSignature: true });
    expect(result).toMatchObject({ status: 401, error: { code: 'signature_required' }, warnedAtStart: [] });
  });

  it('without secrets or public keys, takes unsigned events on their checksum as before, silently', async () => {
    for (const options of [{}, { allowUnsigned: true }, { requireSignature: false }]) {
      const result = await deliver(options);
      expect(result).toMatchObject({
        status: 200,
        handled: ['payment.session.succeeded'],
        warnedAtStart: [],
      });
    }
    // The checksum still authenticates: a wrong one is refused.
    const receiver = createReceiver({ businessIds: ['another'], allowAnyIp: true, recoveryIntervalMs: 0 });
    const { body, headers } = createTestRequest(createTestEvent('payment.session.succeeded', BIZ));
    const refused = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      headers,
      rawBody: body,
    });
    await receiver.close();
    expect(refused).toMatchObject({ status: 401, body: { error: { code: 'invalid_checksum' } } });
  });

  it('refuses contradicting or mistyped options with a TypeError', () => {
    const base = { businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0, signingSecrets: [SECRET] };
    expect(() => createReceiver({ ...base, allowUnsigned: true, requireSignature: true })).toThrow(
      /Give allowUnsigned: true or requireSignature: true, not both/,
    );
    expect(() => createReceiver({ ...base, allowUnsigned: 'yes' as unknown as boolean })).toThrow(
      /Invalid allowUnsigned: expected a boolean/,
    );
  });
});
