// @module-tag postgres
// @module-tag pglite
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createNodeRequest,
  createReceiver,
  generateSigningKeyPair,
  generateSigningSecret,
  type Receiver,
  readSignatureHeaders,
  silentLogger,
  verifyWebhookSignature,
  writeResponse,
} from '@payhook/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import type { Db } from '../src/db/schema.js';
import {
  buildApp,
  createApiKey,
  createDeliveryWorker,
  type Database,
  listSigningSecrets,
  loadConfig,
  readSecretKeys,
  SECRET_KEY_FILE,
  SecretKeyError,
  type SecretKeys,
  startSender,
} from '../src/index.js';
import { currentEndpointSecrets } from '../src/signing/endpoint-secrets.js';
import { signingKeyring } from '../src/signing/keyring.js';
import { reopenedStorage } from './fixtures/reopened-storage.js';
import { sessionRequest } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

// Signing secrets sealed at rest (docs/decisions.md, "Signing secrets sealed at rest"): no table
// holds a secret in any form, deliveries still verify at a payhook receiver, plaintext rows of a
// previous version are sealed at start, the key rotates, and a wrong or missing key refuses to start.

const key = (id: string) => `${id}:${randomBytes(32).toString('base64url')}`;
const keys = (current: string, ...previous: string[]): SecretKeys =>
  readSecretKeys({
    PAYHOOK_SECRET_KEY: current,
    PAYHOOK_SECRET_KEY_PREVIOUS: previous.join(','),
  }) as SecretKeys;

/** Every form a secret could be stored in: as given, its key part, and that key's bytes in hex and base64. */
function forms(secret: string): string[] {
  const body = secret.slice(secret.indexOf('_') + 1);
  const bytes = Buffer.from(body, 'base64');
  return [
    secret,
    body,
    bytes.toString('hex'),
    bytes.toString('base64url'),
    bytes.toString('base64').replace(/=+$/, ''),
  ];
}

/** Every row of every table of the database's schema, as text. */
async function everyRow(db: Db): Promise<string> {
  const { rows: tables } = await sql<{
    name: string;
  }>`select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE'`.execute(db);
  expect(tables.map((t) => t.name)).toEqual(
    expect.arrayContaining(['signing_secrets', 'endpoint_signing_secrets']),
  );
  const dumps: string[] = [];
  for (const { name } of tables) {
    const { rows } = await sql`select * from ${sql.table(name)}`.execute(db);
    dumps.push(JSON.stringify(rows));
  }
  return dumps.join('\n');
}

/** The `secret` column of a table, as stored. */
const stored = async (db: Db, table: 'signing_secrets' | 'endpoint_signing_secrets') =>
  (await sql<{ secret: string }>`select secret from ${sql.table(table)}`.execute(db)).rows.map(
    (r) => r.secret,
  );

/** A payhook receiver that requires a signature, on loopback: the statuses it answered. */
async function signedReceiver(
  businessId: string,
  options: { signingSecrets?: string[]; signingPublicKeys?: string[] },
) {
  const receiver: Receiver = createReceiver({
    businessIds: [businessId],
    allowedIps: ['127.0.0.1'],
    requireSignature: true,
    logger: silentLogger,
    ...options,
  });
  const handled: string[] = [];
  receiver.onAny((event) => {
    handled.push(event.event);
  });
  const toRequest = createNodeRequest<IncomingMessage>({
    incoming: (req) => req,
    clientIp: (req) => req.socket.remoteAddress,
  });
  const statuses: number[] = [];
  const server: Server = createServer((req, res) => {
    receiver.handle(toRequest(req)).then((result) => {
      statuses.push(result.status);
      writeResponse(res, result);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    statuses,
    handled,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(testStorages())('signing secrets at rest on %s', { timeout: 90_000 }, (storage) => {
  const BIZ = `biz-at-rest-${storage}`;
  const KEY = `sk_test_at_rest_${storage}`;
  let database: Database;
  let cleanup: () => Promise<void>;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base = '';
  const call = apiClient(() => base, KEY);

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'at_rest'));
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  it('keeps no secret in any column of any table, and deliveries verify at receivers that require a signature', async () => {
    type Made = { data: { id: string } };
    // Pointed at their receivers once the secrets are known (below).
    const own = await call<Made>('POST', '/webhook-endpoints', {
      url: 'http://127.0.0.1:9/v1',
      signature_scheme: 'v1',
    });
    const ed = await call<Made>('POST', '/webhook-endpoints', {
      url: 'http://127.0.0.1:9/v1a',
      signature_scheme: 'v1a',
    });
    {
      expect([own.status, ed.status]).toEqual([201, 201]);
      // A previous secret of each kind too: the business's and the endpoint's, rotated with an overlap.
      expect((await call('POST', '/accounts/signing-secrets/rotate', {})).status).toBe(200);
      const rotate = `/webhook-endpoints/${own.body.data.id}/signing-secrets/rotate`;
      expect((await call('POST', rotate, {})).status).toBe(200);
      type Shown = { data: { secret?: string; public_key?: string }[] };
      const business = (await call<Shown>('GET', '/accounts/signing-secrets')).body.data.map((s) => s.secret);
      const endpoint = (
        await call<Shown>('GET', `/webhook-endpoints/${own.body.data.id}/signing-secrets`)
      ).body.data.map((s) => s.secret);
      const publicKeys = (
        await call<Shown>('GET', `/webhook-endpoints/${ed.body.data.id}/signing-secrets`)
      ).body.data.map((s) => s.public_key as string);
      const secretKeys = (await currentEndpointSecrets(database.db, ed.body.data.id, 'v1a')).map(
        (s) => s.secret,
      );
      const secrets = [...business, ...endpoint, ...secretKeys] as string[];
      expect(business).toHaveLength(2);
      expect(endpoint).toHaveLength(2);
      expect(secretKeys).toEqual([expect.stringMatching(/^whsk_/)]);

      const everything = await everyRow(database.db);
      for (const secret of secrets) for (const form of forms(secret)) expect(everything).not.toContain(form);
      for (const value of [
        ...(await stored(database.db, 'signing_secrets')),
        ...(await stored(database.db, 'endpoint_signing_secrets')),
      ])
        expect(value).toMatch(/^v1:ktest:[A-Za-z0-9_-]+$/);
      // The public key is no secret: it stays readable, for the API to show.
      expect(everything).toContain(publicKeys[0]);

      // Signed with the opened secrets: each receiver, holding what the API showed, accepts.
      const v1Receiver = await signedReceiver(BIZ, { signingSecrets: [endpoint[0] as string] });
      const v1aReceiver = await signedReceiver(BIZ, { signingPublicKeys: publicKeys });
      try {
        expect(
          (await call('PATCH', `/webhook-endpoints/${own.body.data.id}`, { url: v1Receiver.url })).status,
        ).toBe(200);
        expect(
          (await call('PATCH', `/webhook-endpoints/${ed.body.data.id}`, { url: v1aReceiver.url })).status,
        ).toBe(200);
        expect((await call('POST', '/payment-sessions', sessionRequest)).status).toBe(201);
        const worker = createDeliveryWorker({ database, allowPrivate: true });
        await worker.runDue();
        await worker.stop();
        expect(v1Receiver.statuses).toEqual([200]);
        expect(v1aReceiver.statuses).toEqual([200]);
        expect(v1Receiver.handled).toEqual(['payment.session.created']);
        expect(v1aReceiver.handled).toEqual(['payment.session.created']);
      } finally {
        await v1Receiver.close();
        await v1aReceiver.close();
      }
    }
  });
});

describe.each(testStorages())('the sealing key on %s', { timeout: 120_000 }, (storage) => {
  const owner = { businessId: `biz-sealing-${storage}`, mode: 'test' as const };
  const K1 = key('k1');
  const K2 = key('k2');

  it('seals at start the plaintext secrets a previous version stored, and signs with them', async () => {
    const where = await reopenedStorage(storage, 'sealing_upgrade');
    try {
      let database = await where.open(keys(K1));
      // As the previous version wrote them: the business's secret and a v1a endpoint's key pair.
      const secret = generateSigningSecret();
      const pair = generateSigningKeyPair();
      await sql`insert into signing_secrets (business_id, mode, secret) values (${owner.businessId}, 'test', ${secret})`.execute(
        database.db,
      );
      const { rows } = await sql<{
        id: string;
      }>`insert into webhook_endpoints (business_id, mode, url, signature_scheme)
        values (${owner.businessId}, 'test', 'https://receiver.example/hooks', 'v1a') returning id`.execute(
        database.db,
      );
      const endpointId = rows[0]?.id as string;
      await sql`insert into endpoint_signing_secrets (endpoint_id, secret, public_key)
        values (${endpointId}, ${pair.secretKey}, ${pair.publicKey})`.execute(database.db);

      database = await where.open(keys(K1));
      expect(await stored(database.db, 'signing_secrets')).toEqual([expect.stringMatching(/^v1:k1:/)]);
      expect(await stored(database.db, 'endpoint_signing_secrets')).toEqual([
        expect.stringMatching(/^v1:k1:/),
      ]);
      const everything = await everyRow(database.db);
      for (const form of [...forms(secret), ...forms(pair.secretKey)]) expect(everything).not.toContain(form);
      expect((await listSigningSecrets(database.db, owner)).map((s) => s.secret)).toEqual([secret]);
      // The attempts are signed with the opened secrets.
      const keyring = signingKeyring(database);
      const body = '{"event":"payment.session.created"}';
      const own = await keyring.sign(owner, 'evt_1', body, endpointId);
      expect(
        verifyWebhookSignature(readSignatureHeaders(own), body, { publicKeys: [pair.publicKey] }).ok,
      ).toBe(true);
      const business = await keyring.sign(owner, 'evt_2', body);
      expect(verifyWebhookSignature(readSignatureHeaders(business), body, { secrets: [secret] }).ok).toBe(
        true,
      );
      // Sealed once: a start after it changes nothing.
      const before = await stored(database.db, 'signing_secrets');
      database = await where.open(keys(K1));
      expect(await stored(database.db, 'signing_secrets')).toEqual(before);
    } finally {
      await where.cleanup();
    }
  });

  it('rotates the key: the new one seals, the previous one still opens, and every value is sealed again', async () => {
    const where = await reopenedStorage(storage, 'sealing_rotation');
    try {
      let database = await where.open(keys(K1));
      await createApiKey(database.db, owner);
      const [secret] = await listSigningSecrets(database.db, owner);
      expect(await stored(database.db, 'signing_secrets')).toEqual([expect.stringMatching(/^v1:k1:/)]);
      // Step 2 of the procedure: the new key seals, the old one is kept to open.
      database = await where.open(keys(K2, K1));
      expect(await stored(database.db, 'signing_secrets')).toEqual([expect.stringMatching(/^v1:k2:/)]);
      expect(await listSigningSecrets(database.db, owner)).toEqual([secret]);
      // Step 3: the old key is dropped; what it sealed was sealed again at the start before.
      database = await where.open(keys(K2));
      expect(await listSigningSecrets(database.db, owner)).toEqual([secret]);
      // Only the old key: the values are under k2, which it does not hold.
      const refused = await where.open(keys(K1)).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(SecretKeyError);
      expect(refused).toMatchObject({
        code: 'secret_key_unknown',
        message: expect.stringMatching(/"k2".*PAYHOOK_SECRET_KEY_PREVIOUS/),
      });
    } finally {
      await where.cleanup();
    }
  });

  it('refuses to start with a wrong key, or none, naming the variable', async () => {
    const where = await reopenedStorage(storage, 'sealing_refusal');
    try {
      const database = await where.open(keys(K1));
      await createApiKey(database.db, owner);
      // The same id, other bytes: the key is checked against a stored value before any signing.
      const wrong = await where.open(keys(key('k1'))).catch((error: unknown) => error);
      expect(wrong).toMatchObject({
        code: 'secret_key_wrong',
        message: expect.stringContaining('PAYHOOK_SECRET_KEY'),
      });
      const missing = await where.open(undefined).catch((error: unknown) => error);
      if (storage === 'postgres') {
        expect(missing).toMatchObject({
          code: 'secret_key_missing',
          message: expect.stringMatching(/^PAYHOOK_SECRET_KEY is not set/),
        });
      } else {
        // The sandbox's own key file, made now, does not hold k1.
        expect(missing).toMatchObject({
          code: 'secret_key_unknown',
          message: expect.stringContaining('"k1"'),
        });
      }
      // A malformed key is refused when the configuration is read.
      expect(() => loadConfig({ PAYHOOK_SECRET_KEY: 'k1:short' })).toThrow(
        expect.objectContaining({
          code: 'secret_key_invalid',
          message: expect.stringContaining('PAYHOOK_SECRET_KEY'),
        }),
      );
      // The right key still opens, after the refusals.
      expect((await where.open(keys(K1))).kind).toBe(storage);
    } finally {
      await where.cleanup();
    }
  });
});

describe('the embedded sandbox without PAYHOOK_SECRET_KEY', { timeout: 90_000 }, () => {
  it('makes a key file of mode 0600 in its data directory, says so at start, and reads it again on a restart', async () => {
    const where = await reopenedStorage('pglite', 'sandbox_key');
    try {
      let database = await where.open(undefined);
      const file = database.secretKeyFile;
      expect(file).toEqual({ path: `${where.dataDir}/${SECRET_KEY_FILE}`, created: true });
      expect((await stat(file?.path as string)).mode & 0o777).toBe(0o600);
      const owner = { businessId: 'biz-sandbox-key', mode: 'test' as const };
      await createApiKey(database.db, owner);
      const [secret] = await listSigningSecrets(database.db, owner);
      expect(await stored(database.db, 'signing_secrets')).toEqual([
        expect.stringMatching(/^v1:k[0-9a-f]{8}:/),
      ]);

      database = await where.open(undefined);
      expect(database.secretKeyFile).toEqual({ path: file?.path, created: false });
      expect(await listSigningSecrets(database.db, owner)).toEqual([secret]);
      const lines: string[] = [];
      const sender = await startSender({
        config: loadConfig({ PORT: '0' }),
        database,
        logger: { level: 'info', stream: { write: (line) => void lines.push(line) } },
      });
      await sender.close();
      expect(lines.join('')).toContain(`signing secrets are sealed with the key in ${file?.path}`);
    } finally {
      await where.cleanup();
    }
  });
});
