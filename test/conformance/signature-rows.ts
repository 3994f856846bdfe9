import {
  generateSigningSecret,
  type PayhookEvent,
  type Receiver,
  type ReceiverOptions,
  signWebhook,
} from '@payhook/core';
import { createTestEvent, createTestRequest, signEvent } from '@payhook/core/testing';
import { expect, it } from 'vitest';

/** What the conformance suite's `setup` gives a row: a receiver mounted on a running app. */
export type SignatureRowsSetup = (options?: Partial<ReceiverOptions>) => Promise<{
  receiver: Receiver;
  seen: { events: PayhookEvent[] };
  post: (body: string, headers?: Record<string, string>) => Promise<Response>;
}>;

const SECRET = generateSigningSecret();
const PREVIOUS = generateSigningSecret();
const STRANGER = generateSigningSecret();
const now = () => Math.floor(Date.now() / 1000);

/**
 * The Standard Webhooks rows of the conformance suite, over real HTTP on each adapter and
 * mounting: both the signature and the checksum must pass; rotation; the replay window; a
 * signature required by default (allowUnsigned opts out); the `svix-` header names.
 */
export function describeSignatureRows(businessId: string, setup: SignatureRowsSetup): void {
  const event = () => createTestEvent('payment.session.succeeded', businessId);
  const code = async (res: Response) => ((await res.json()) as { error?: { code: string } }).error?.code;

  it('accepts an event whose signature and checksum both verify, once', async () => {
    const { post, receiver, seen } = await setup({ signingSecrets: [SECRET] });
    const { body, headers } = createTestRequest(event(), { secrets: [SECRET] });
    expect((await post(body, headers)).status).toBe(200);
    expect(await (await post(body, headers)).json()).toEqual({ received: true, duplicate: true });
    await receiver.idle();
    expect(seen.events).toHaveLength(1);
  });

  it('refuses a body changed by someone who knows the business id: the checksum verifies, the signature does not', async () => {
    const { post, receiver, seen } = await setup({ signingSecrets: [SECRET] });
    const original = event();
    const { headers } = createTestRequest(original, { secrets: [SECRET] });
    // The forger rewrites the amount and recomputes the checksum with the (public) business id.
    const forged = signEvent(original.event, { ...original.data, amount: 1 }, businessId);
    const res = await post(JSON.stringify(forged), headers);
    expect(res.status).toBe(401);
    expect(await code(res)).toBe('invalid_signature');
    await receiver.idle();
    expect(seen.events).toHaveLength(0);
  });

  it('refuses a signature made with another secret (401 invalid_signature), recording nothing', async () => {
    const { post, receiver, seen } = await setup({ signingSecrets: [SECRET] });
    const payload = event();
    const forged = createTestRequest(payload, { secrets: [STRANGER] });
    const res = await post(forged.body, forged.headers);
    expect(res.status).toBe(401);
    expect(await code(res)).toBe('invalid_signature');
    // Nothing was recorded: the real event, signed, is processed.
    const real = createTestRequest(payload, { secrets: [SECRET] });
    expect(await (await post(real.body, real.headers)).json()).toEqual({ received: true });
    await receiver.idle();
    expect(seen.events).toHaveLength(1);
  });

  it('still verifies the checksum of a signed event (both must pass): 401 invalid_checksum', async () => {
    const { post } = await setup({ signingSecrets: [SECRET] });
    const payload = { ...event(), checksum: 'a'.repeat(64) };
    const { body, headers } = createTestRequest(payload, { secrets: [SECRET] });
    const res = await post(body, headers);
    expect(res.status).toBe(401);
    expect(await code(res)).toBe('invalid_checksum');
  });

  it('accepts either secret during a rotation, and a header listing both', async () => {
    const { post } = await setup({ signingSecrets: [SECRET, PREVIOUS] });
    for (const secrets of [[SECRET], [PREVIOUS], [PREVIOUS, SECRET], [STRANGER, SECRET]]) {
      const { body, headers } = createTestRequest(event(), { secrets });
      expect((await post(body, headers)).status).toBe(200);
    }
  });

  it('refuses a timestamp more than the tolerance from its clock, either way: 401 signature_timestamp_out_of_tolerance', async () => {
    const { post } = await setup({ signingSecrets: [SECRET], signatureToleranceSeconds: 300 });
    // A few seconds past the tolerance: the clock may cross a second between signing and checking
    // (the exact boundary is tested in core's unit tests with a fixed clock).
    for (const timestamp of [now() - 305, now() + 305]) {
      const { body, headers } = createTestRequest(event(), { secrets: [SECRET], timestamp });
      const res = await post(body, headers);
      expect(res.status).toBe(401);
      expect(await code(res)).toBe('signature_timestamp_out_of_tolerance');
    }
    const { body, headers } = createTestRequest(event(), { secrets: [SECRET], timestamp: now() - 200 });
    expect((await post(body, headers)).status).toBe(200);
  });

  it('refuses unsigned events once it has a secret (401 signature_required), unless allowUnsigned: true', async () => {
    const secured = await setup({ signingSecrets: [SECRET] });
    const res = await secured.post(JSON.stringify(event()));
    expect(res.status).toBe(401);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('signature_required');
    expect(error.message).toContain('allowUnsigned');
    await secured.receiver.idle();
    expect(secured.seen.events).toHaveLength(0);
    const migrating = await setup({ signingSecrets: [SECRET], allowUnsigned: true });
    expect((await migrating.post(JSON.stringify(event()))).status).toBe(200);
    await migrating.receiver.idle();
    expect(migrating.seen.events).toHaveLength(1);
  });

  it('refuses incomplete or malformed signature headers with 401 invalid_signature', async () => {
    const { post } = await setup({ signingSecrets: [SECRET] });
    const body = JSON.stringify(event());
    const good = signWebhook({ id: 'evt_1', body, secrets: [SECRET] });
    const cases: Record<string, string>[] = [
      { 'webhook-signature': good['webhook-signature'] },
      { ...good, 'webhook-timestamp': 'yesterday' },
      { ...good, 'webhook-signature': 'v1,not-base64!' },
      { ...good, 'webhook-signature': good['webhook-signature'].replace('v1,', 'v2,') },
      { ...good, 'webhook-id': 'evt_2' },
    ];
    for (const headers of cases) {
      const res = await post(body, headers);
      expect(res.status).toBe(401);
      expect(await code(res)).toBe('invalid_signature');
    }
  });

  it('reads the svix- header names as Svix libraries send them', async () => {
    const { post } = await setup({ signingSecrets: [SECRET] });
    const body = JSON.stringify(event());
    const signed = signWebhook({ id: 'msg_1', body, secrets: [SECRET] });
    const res = await post(body, {
      'svix-id': signed['webhook-id'],
      'svix-timestamp': signed['webhook-timestamp'],
      'svix-signature': signed['webhook-signature'],
    });
    expect(res.status).toBe(200);
  });
}
