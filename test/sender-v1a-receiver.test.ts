// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createNodeRequest,
  createReceiver,
  generateSigningKeyPair,
  type Receiver,
  silentLogger,
  writeResponse,
} from '@payhook/core';
import {
  buildApp,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  loadConfig,
  openDatabase,
} from '@payhook/sender';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningApp } from './conformance/adapter-conformance.js';
import { apiClient } from './support/api-client.js';
import { copyPgliteTemplate } from './support/pglite-template.js';

// A v1a endpoint end to end: the real sender signs its attempts with Ed25519, and a payhook
// receiver that holds only the endpoint's whpk_ public key (and requires a signature) accepts
// them, through a rotation with an overlap; a receiver holding only the key a rotation without
// overlap ended refuses the next one.

const BIZ = '5b7d2c1e-3f4a-4b5c-8d6e-7f8091a2b3c4';
const KEY = 'sk_test_e2e_v1a';
const HOST = '127.0.0.1';

describe('v1a signatures from the sender, verified by a payhook receiver with a public key', {
  timeout: 60_000,
}, () => {
  let dir: string;
  let database: Database;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base: string;
  let worker: DeliveryWorker;
  let endpointId: string;
  /** The receiver the server hands requests to: replaced when the test gives it other keys. */
  let receiver: Receiver;
  let handled: string[] = [];
  let server: { url: string; close(): Promise<void> };

  const call = apiClient(() => base, KEY);

  function receiverWith(signingPublicKeys: string[]): Receiver {
    const r = createReceiver({
      businessIds: [BIZ],
      allowedIps: ['127.0.0.1'],
      signingPublicKeys,
      requireSignature: true,
      logger: silentLogger,
    });
    r.onAny((event) => {
      handled.push(event.event);
    });
    return r;
  }

  const publicKeys = async () =>
    (
      await call<{ data: { public_key: string; current: boolean }[] }>(
        'GET',
        `/webhook-endpoints/${endpointId}/signing-secrets`,
      )
    ).body.data.map((k) => k.public_key);

  /** One new event, delivered; the status codes of its attempts. */
  async function deliverOne(): Promise<(number | null)[]> {
    const created = await call<{ data: { payment: { id: string } } }>('POST', '/payment-sessions', {
      customer: {
        first_name: 'Ada',
        last_name: 'Eze',
        email: 'ada@example.com',
        phone_number: '+2348031234567',
        billing_address: {
          line1: '1 Marina',
          line2: '',
          city: 'Lagos',
          state: 'Lagos',
          zip_code: '101',
          country: 'NG',
        },
      },
      description: 'Signed order',
      currency: 'NGN',
      amount: 150_000,
      payment_method: { type: 'bank_account' },
      metadata: { order: { identifier: 'ORD-V1A', items: [{ name: 'Lamp', type: 'physical' }] } },
    });
    expect(created.status).toBe(201);
    const events = await call<{ data: { id: string }[] }>(
      'GET',
      `/events?payment_id=${created.body.data.payment.id}`,
    );
    const id = events.body.data[0]?.id as string;
    await worker.runDue();
    await receiver.idle();
    const detail = await call<{ data: { deliveries: { attempts: { status_code: number | null }[] }[] } }>(
      'GET',
      `/events/${id}`,
    );
    return detail.body.data.deliveries.flatMap((d) => d.attempts.map((a) => a.status_code));
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-v1a-'));
    await copyPgliteTemplate(join(dir, 'data'));
    database = await openDatabase({ dataDir: join(dir, 'data') });
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: HOST });
    // Until the endpoint exists: a key of no endpoint.
    receiver = receiverWith([generateSigningKeyPair().publicKey]);
    const toRequest = createNodeRequest<IncomingMessage>({
      incoming: (req) => req,
      clientIp: (req) => req.socket.remoteAddress,
    });
    const running = await runningApp(
      createServer((req, res) => {
        receiver.handle(toRequest(req)).then((result) => writeResponse(res, result));
      }).listen(0, HOST),
      HOST,
    );
    server = { url: `${running.url}/webhooks/`, close: () => running.close() };
    const endpoint = await call<{ data: { id: string; signature_scheme: string } }>(
      'POST',
      '/webhook-endpoints',
      {
        url: server.url,
        signature_scheme: 'v1a',
      },
    );
    expect(endpoint.status).toBe(201);
    endpointId = endpoint.body.data.id;
    worker = createDeliveryWorker({ database, allowPrivate: true });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await app?.close();
    await server?.close();
    await receiver?.close();
    await database?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('is accepted by a receiver holding only the public key, and refused by one holding another', async () => {
    const [first] = await publicKeys();
    await receiver.close();
    receiver = receiverWith([first as string]);
    expect(await deliverOne()).toEqual([200]);
    expect(handled).toEqual(['payment.session.created']);
    // A receiver given some other endpoint's key refuses: the signature is the endpoint's own.
    const other = await call<{ data: { id: string } }>('POST', '/webhook-endpoints', {
      url: 'https://other.example/',
      signature_scheme: 'v1a',
      enabled_events: ['payment.session.failed'],
    });
    const otherKeys = await call<{ data: { public_key: string }[] }>(
      'GET',
      `/webhook-endpoints/${other.body.data.id}/signing-secrets`,
    );
    await receiver.close();
    receiver = receiverWith([otherKeys.body.data[0]?.public_key as string]);
    expect(await deliverOne()).toEqual([401]);
  });

  it('keeps verifying through a rotation with an overlap with either key, and refuses an ended key', async () => {
    const [old] = await publicKeys();
    const rotated = await call<{ data: { public_key: string }[] }>(
      'POST',
      `/webhook-endpoints/${endpointId}/signing-secrets/rotate`,
      { overlap_seconds: 600 },
    );
    expect(rotated.status).toBe(200);
    const fresh = rotated.body.data[0]?.public_key as string;
    for (const keys of [[fresh], [old as string]]) {
      await receiver.close();
      receiver = receiverWith(keys);
      expect(await deliverOne()).toEqual([200]);
    }
    await call('POST', `/webhook-endpoints/${endpointId}/signing-secrets/rotate`, { overlap_seconds: 0 });
    const [newest] = await publicKeys();
    await receiver.close();
    receiver = receiverWith([fresh]);
    expect(await deliverOne()).toEqual([401]);
    await receiver.close();
    receiver = receiverWith([newest as string]);
    handled = [];
    expect(await deliverOne()).toEqual([200]);
    expect(handled).toEqual(['payment.session.created']);
  });
});
