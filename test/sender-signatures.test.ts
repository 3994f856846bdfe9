// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNodeRequest, createReceiver, type Receiver, silentLogger, writeResponse } from '@payhook/core';
import {
  buildApp,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  loadConfig,
  openDatabase,
} from '@payhook/sender';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningApp } from './conformance/adapter-conformance.js';
import { apiClient } from './support/api-client.js';
import { copyPgliteTemplate } from './support/pglite-template.js';

// The real sender signs every attempt; receivers built on three libraries verify it: payhook's
// (signature required, checksum too), the `standardwebhooks` package and Svix's. Then the secret
// is rotated, with an overlap and without one, as a merchant would live through it.

const BIZ = '8f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const KEY = 'sk_test_e2e_signatures';
const HOST = '127.0.0.1';

/** A receiver that verifies with one library and a secret the test changes as a merchant would. */
interface LibraryReceiver {
  name: string;
  url: string;
  secret: string;
  /** Event ids (webhook-id) verified, in order, and the refusals. */
  verified: string[];
  refused: string[];
  close(): Promise<void>;
}

async function libraryReceiver(
  name: string,
  verify: (secret: string, body: string, headers: IncomingHttpHeaders) => void,
  secret: string,
): Promise<LibraryReceiver> {
  const receiver: LibraryReceiver = {
    name,
    url: '',
    secret,
    verified: [],
    refused: [],
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        verify(receiver.secret, body, req.headers);
        receiver.verified.push(String(req.headers['webhook-id']));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      } catch (error) {
        receiver.refused.push((error as Error).message);
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad signature"}');
      }
    });
  }).listen(0, HOST);
  const app = await runningApp(server, HOST);
  receiver.url = `${app.url}/webhooks/`;
  receiver.close = app.close;
  return receiver;
}

const asRecord = (headers: IncomingHttpHeaders) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)]));

describe('signatures from the sender, verified by payhook, standardwebhooks and svix', {
  timeout: 60_000,
}, () => {
  let dir: string;
  let database: Database;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base: string;
  let worker: DeliveryWorker;
  let first: string;
  let payhook: { url: string; receiver: Receiver; events: string[]; close(): Promise<void> };
  let libraries: LibraryReceiver[] = [];

  const call = apiClient(() => base, KEY);

  const secrets = async () =>
    (await call<{ data: { secret: string; current: boolean }[] }>('GET', '/accounts/signing-secrets')).body
      .data;

  /** A payhook receiver on node:http that requires a signature made with one of `signingSecrets`. */
  async function payhookReceiver(signingSecrets: string[]) {
    const events: string[] = [];
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowedIps: ['127.0.0.1'],
      signingSecrets,
      requireSignature: true,
      logger: silentLogger,
    });
    receiver.onAny((event) => {
      events.push(event.event);
    });
    const toRequest = createNodeRequest<IncomingMessage>({
      incoming: (req) => req,
      clientIp: (req) => req.socket.remoteAddress,
    });
    const server = createServer((req, res) => {
      receiver.handle(toRequest(req)).then((result) => writeResponse(res, result));
    }).listen(0, HOST);
    const running = await runningApp(server, HOST);
    return {
      url: `${running.url}/webhooks/`,
      receiver,
      events,
      close: async () => {
        await running.close();
        await receiver.close();
      },
    };
  }

  /** Creates a session (one payment.session.created event) and waits until every URL answered. */
  async function newEvent(): Promise<string> {
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
      metadata: { order: { identifier: 'ORD-SIG', items: [{ name: 'Lamp', type: 'physical' }] } },
    });
    expect(created.status).toBe(201);
    const events = await call<{ data: { id: string }[] }>(
      'GET',
      `/events?payment_id=${created.body.data.payment.id}`,
    );
    const id = events.body.data[0]?.id as string;
    await worker.runDue();
    return id;
  }

  const attemptsOf = async (eventId: string) =>
    (
      await call<{ data: { deliveries: { url: string; attempts: { status_code: number | null }[] }[] } }>(
        'GET',
        `/events/${eventId}`,
      )
    ).body.data.deliveries;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-signatures-'));
    await copyPgliteTemplate(join(dir, 'data'));
    database = await openDatabase({ dataDir: join(dir, 'data') });
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: HOST });
    first = (await secrets())[0]?.secret as string;
    payhook = await payhookReceiver([first]);
    libraries = [
      await libraryReceiver(
        'standardwebhooks',
        (secret, body, headers) => new StandardWebhook(secret).verify(body, asRecord(headers)),
        first,
      ),
      await libraryReceiver(
        'svix',
        (secret, body, headers) => new SvixWebhook(secret).verify(body, asRecord(headers)),
        first,
      ),
    ];
    const urls = [payhook.url, ...libraries.map((l) => l.url)];
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: urls })).status).toBe(200);
    worker = createDeliveryWorker({ database, allowPrivate: true });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await app?.close();
    await payhook?.close();
    for (const l of libraries) await l.close();
    await database?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('every receiver verifies the attempt; webhook-id is the event id', async () => {
    const eventId = await newEvent();
    await payhook.receiver.idle();
    expect(payhook.events).toEqual(['payment.session.created']);
    for (const l of libraries) {
      expect(l.verified, l.name).toEqual([eventId]);
      expect(l.refused, l.name).toEqual([]);
    }
    for (const d of await attemptsOf(eventId)) expect(d.attempts.map((a) => a.status_code)).toEqual([200]);
  });

  it('keeps every receiver verifying through a rotation with an overlap, whichever secret each holds', async () => {
    const rotated = await call<{ data: { secret: string; current: boolean }[] }>(
      'POST',
      '/accounts/signing-secrets/rotate',
    );
    expect(rotated.status).toBe(200);
    const next = rotated.body.data[0]?.secret as string;
    // The payhook receiver moves to the new secret at once; the library receivers stay on the old one.
    // Every attempt carries both signatures during the overlap.
    await payhook.close();
    payhook = await payhookReceiver([next]);
    const urls = [payhook.url, ...libraries.map((l) => l.url)];
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: urls })).status).toBe(200);
    const eventId = await newEvent();
    await payhook.receiver.idle();
    expect(payhook.events).toEqual(['payment.session.created']);
    for (const l of libraries) expect([l.verified.at(-1), l.refused], l.name).toEqual([eventId, []]);
  });

  it('refuses at once the secret a rotation without overlap ends, and verifies with the new one', async () => {
    const [current] = await secrets();
    const ended = current?.secret as string;
    const rotated = await call<{ data: { secret: string; current: boolean }[] }>(
      'POST',
      '/accounts/signing-secrets/rotate',
      { overlap_seconds: 0 },
    );
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.map((s) => s.secret)).not.toContain(ended);
    const newest = rotated.body.data[0]?.secret as string;
    // One library receiver moved to the new secret, the other and payhook's still hold the ended one.
    const [late, moved] = libraries as [LibraryReceiver, LibraryReceiver];
    late.secret = ended;
    moved.secret = newest;
    const eventId = await newEvent();
    const byUrl = new Map(
      (await attemptsOf(eventId)).map((d) => [d.url, d.attempts.map((a) => a.status_code)]),
    );
    expect(byUrl.get(late.url)).toEqual([401]);
    expect(byUrl.get(payhook.url)).toEqual([401]);
    expect(byUrl.get(moved.url)).toEqual([200]);
    expect(late.refused.at(-1)).toMatch(/signature/i);
    expect(moved.verified.at(-1)).toBe(eventId);
  });
});
