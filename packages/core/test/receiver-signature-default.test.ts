import {
  createReceiver,
  generateSigningKeyPair,
  generateSigningSecret,
  type Logger,
  type ReceiverOptions,
  signWebhookV1a,
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

describe('the log line of a refused event names the option to check', () => {
  /** Sends one request to a receiver with `options`; resolves to the answer's code and the warnings. */
  async function refused(
    options: Partial<ReceiverOptions>,
    sign: (body: string) => Record<string, string>,
    businessId = BIZ,
  ) {
    const logger = recordingLogger();
    const receiver = createReceiver({
      businessIds: [BIZ],
      recoveryIntervalMs: 0,
      logger,
      allowAnyIp: true,
      ...options,
    });
    const { body } = createTestRequest(createTestEvent('payment.session.succeeded', businessId));
    const result = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '203.0.113.7',
      headers: { 'content-type': 'application/json', ...sign(body) },
      rawBody: body,
    });
    await receiver.close();
    return { code: (result.body as { error?: { code: string } }).error?.code, warnings: logger.warnings };
  }
  const v1 = (secret: string) => (body: string) => createTestRequest(body, { secrets: [secret] }).headers;
  const v1a = (secretKey: string) => (body: string) =>
    signWebhookV1a({ id: 'evt_log_hint', body, secretKeys: [secretKey] }) as unknown as Record<
      string,
      string
    >;

  it('a v1 signature made with another secret: signingSecrets, code unchanged', async () => {
    const { code, warnings } = await refused({ signingSecrets: [SECRET] }, v1(generateSigningSecret()));
    expect(code).toBe('invalid_signature');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^payhook: event refused: No webhook-signature matches a configured signing secret\. \(check signingSecrets \(the sender's whsec_\.\.\. secret, v1\): after a rotation, add the new one\)$/,
    );
    expect(warnings[0]).not.toContain('signingPublicKeys');
  });

  it('a v1a signature made with another key pair: signingPublicKeys, even on a receiver that has both', async () => {
    const other = generateSigningKeyPair().secretKey;
    const { code, warnings } = await refused({ signingPublicKeys: [PAIR.publicKey] }, v1a(other));
    expect(code).toBe('invalid_signature');
    expect(warnings[0]).toContain("(check signingPublicKeys (the endpoint's whpk_... public key, v1a)");
    expect(warnings[0]).not.toContain('signingSecrets');
    const both = await refused({ signingSecrets: [SECRET], signingPublicKeys: [PAIR.publicKey] }, v1a(other));
    expect(both.warnings[0]).toContain('check signingPublicKeys');
    expect(both.warnings[0]).not.toContain('signingSecrets');
  });

  it('a checksum made with another business id: businessIds', async () => {
    const { code, warnings } = await refused({}, () => ({}), 'biz_another');
    expect(code).toBe('invalid_checksum');
    expect(warnings[0]).toContain(
      '(check businessIds: the checksum is keyed by the business id the event names)',
    );
  });

  it('an address outside the allow-list: allowedIps, with its code', async () => {
    const { code, warnings } = await refused({ allowAnyIp: false, allowedIps: ['127.0.0.1'] }, () => ({}));
    expect(code).toBe('ip_not_allowed');
    expect(warnings).toEqual([
      'payhook: request from 203.0.113.7, an address outside allowedIps, refused (403 ip_not_allowed): if the sender sends from it, add it (or its range) to allowedIps',
    ]);
  });
});
