// @module-tag postgres
// @module-tag pglite
import { crc32, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, expireSessions } from '../src/index.js';
import { startTestApp, type TestApp } from './fixtures/app.js';
import { CURRENCY, customer, metadata } from './fixtures/requests.js';
import { testStorages } from './fixtures/storage.js';

const CARD = { card: { number: '4242424242424242', expiry_month: 9, expiry_year: 2030, cvv: '123' } };

/** The chunks of a PNG, each checked against its CRC; throws on anything that is not a PNG. */
function readPng(bytes: Buffer): { type: string; data: Buffer }[] {
  expect([...bytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const chunks: { type: string; data: Buffer }[] = [];
  for (let at = 8; at < bytes.length; ) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + length);
    expect(bytes.readUInt32BE(at + 8 + length), `CRC of ${type}`).toBe(
      crc32(bytes.subarray(at + 4, at + 8 + length)),
    );
    chunks.push({ type, data });
    at += 12 + length;
  }
  return chunks;
}

describe.each(testStorages())('the sandbox on %s', { timeout: 60_000 }, (storage) => {
  let url: string;
  let database: Database;
  const BIZ = '0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d';
  const KEY = 'sk_test_sandbox';
  const LIVE = 'sk_live_sandbox';
  const OTHER = 'sk_test_sandbox_other';

  let testApp: TestApp | undefined;
  // PGlite's start and migrations can take longer than the default 10 s on a busy machine.
  beforeAll(async () => {
    testApp = await startTestApp(storage, 'sandbox', {
      PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test,${LIVE}:${BIZ}:live,${OTHER}:biz-other:test`,
    });
    ({ url, database } = testApp);
  }, 60_000);
  afterAll(() => testApp?.close());

  type Envelope = {
    status: string;
    message: string;
    expires_at: string;
    links: Record<string, string>;
    payment: { id: string; status: string; cancellation_reason: string | null };
  };
  const call = async (path: string, body?: unknown, key = KEY) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { data: Envelope; error?: { code: string } } };
  };
  const create = async (type: string, key = KEY, extra: Record<string, unknown> = {}) => {
    const res = await call(
      '/payment-sessions',
      {
        customer,
        description: 'Desk lamp',
        currency: CURRENCY[type],
        amount: 175000,
        metadata,
        payment_method: { type },
        ...extra,
      },
      key,
    );
    expect(res.status).toBe(201);
    return res.body.data.payment.id;
  };
  /** Creates and captures a session; answers its id and capture links. */
  const captured = async (type: string, key = KEY, extra: Record<string, unknown> = {}) => {
    const id = await create(type, key, extra);
    const res = await call(`/payment-sessions/${id}`, type === 'card' ? CARD : undefined, key);
    expect(res.status).toBe(200);
    return { id, links: res.body.data.links };
  };
  const events = async (paymentId: string) =>
    (
      await database.db
        .selectFrom('events')
        .select('type')
        .where('payment_id', '=', paymentId)
        .orderBy('created_at')
        .execute()
    ).map((e) => e.type);
  const list = async (query: string) => {
    const res = await fetch(`${url}/payments?${query}`, { headers: { authorization: `Bearer ${KEY}` } });
    return ((await res.json()) as { data: Envelope[] }).data.map((e) => e.payment.id);
  };

  describe('capture links', () => {
    it.each([
      ['etransfer', ['redirect_url'], 'E-transfer gateway'],
      ['wallet', ['checkout_url', 'payment_url'], 'Crypto-app'],
      ['card', ['redirect_url'], '3-D Secure check'],
    ])('%s: every link opens a public page describing the payment', async (type, names, title) => {
      const { id, links } = await captured(type);
      for (const name of names) {
        const link = links[name] as string;
        // Absolute, on the service's own origin, and served without an API key.
        expect(link.startsWith(`${url}/sandbox/pay/${id}?method=`), link).toBe(true);
        const res = await fetch(link);
        expect(res.status, name).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/html/);
        expect(res.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
        const html = await res.text();
        expect(html).toContain(title);
        expect(html).toContain('175000');
        expect(html).toContain(CURRENCY[type]);
        expect(html).toContain(`<dd>${type}</dd>`);
        expect(html).toContain(`/sandbox/payment-sessions/${id}/complete`);
      }
    });

    it('wallet: qr_url is a valid PNG, different per payment, shown on the checkout page', async () => {
      const one = await captured('wallet');
      const two = await captured('wallet');
      expect(one.links.qr_url).toBe(`${url}/sandbox/qr/${one.id}.png`);
      const images: Buffer[] = [];
      for (const link of [one.links.qr_url, two.links.qr_url] as string[]) {
        const res = await fetch(link);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe('image/png');
        images.push(Buffer.from(await res.arrayBuffer()));
      }
      const chunks = readPng(images[0] as Buffer);
      expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
      const header = chunks[0]?.data as Buffer;
      const [width, height] = [header.readUInt32BE(0), header.readUInt32BE(4)];
      expect([width, height, header[8], header[9]]).toEqual([232, 232, 1, 0]); // 1-bit greyscale
      // Every scanline: a filter byte, then one bit a pixel.
      expect(inflateSync(chunks[1]?.data as Buffer).length).toBe(height * (1 + Math.ceil(width / 8)));
      expect(images[0]?.equals(images[1] as Buffer)).toBe(false);
      const page = await (await fetch(one.links.checkout_url as string)).text();
      expect(page).toContain(`<img src="/sandbox/qr/${one.id}.png"`);
    });

    it('escapes what the merchant wrote', async () => {
      const { links } = await captured('etransfer', KEY, { description: '<script>alert(1)</script> & co' });
      const html = await (await fetch(links.redirect_url as string)).text();
      expect(html).not.toContain('<script>');
      expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; co');
    });

    it('pages do not exist for live payments, unknown or malformed ids (404 with the error body)', async () => {
      const live = await captured('wallet', LIVE);
      expect(live.links.checkout_url).toBeTruthy();
      const testId = (await captured('wallet')).id;
      for (const link of [
        live.links.checkout_url,
        live.links.payment_url,
        live.links.qr_url,
        `${url}/sandbox/pay/${crypto.randomUUID()}`,
        `${url}/sandbox/qr/${crypto.randomUUID()}.png`,
        `${url}/sandbox/pay/not-a-uuid`,
        `${url}/sandbox/qr/not-a-uuid.png`,
        `${url}/sandbox/qr/${testId}.gif`,
        `${url}/sandbox/qr/${testId}`,
      ] as string[]) {
        const res = await fetch(link);
        expect(res.status, link).toBe(404);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
      }
      expect((await fetch(`${url}/sandbox/pay/${testId}?method=paypal`)).status).toBe(400);
    });

    it('the sandbox API stays behind a key: the public prefix is /sandbox/pay/, not /sandbox/pay', async () => {
      const { id } = await captured('bank_account');
      const res = await fetch(`${url}/sandbox/payment-sessions/${id}/complete`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ outcome: 'succeeded' }),
      });
      expect(res.status).toBe(401);
    });
  });

  describe('completion: captured (funds received), then settled', () => {
    it('settle: false stops at captured, listed under ?status=captured, with no event; settle finishes it', async () => {
      const { id } = await captured('bank_account');
      const received = await call(`/sandbox/payment-sessions/${id}/complete`, {
        outcome: 'succeeded',
        settle: false,
      });
      expect(received.status).toBe(200);
      expect(received.body.data).toMatchObject({ status: 'captured', payment: { status: 'captured' } });
      expect(received.body.data.message).toMatch(/received/);
      expect(await list('status=captured')).toContain(id);
      expect(await list('status=pending')).not.toContain(id);
      expect(await events(id)).toEqual(['payment.session.created']);

      // Funds received: nothing can fail or expire it, nor complete or capture it again.
      for (const [path, body] of [
        [`/sandbox/payment-sessions/${id}/complete`, { outcome: 'failed' }],
        [`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' }],
        [`/sandbox/payment-sessions/${id}/expire`, undefined],
        [`/payment-sessions/${id}`, undefined],
      ] as const) {
        const res = await call(path, body);
        expect(res.status, path).toBe(409);
        expect(res.body.error?.code).toBe('invalid_state');
      }
      await database.db
        .updateTable('payments')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('id', '=', id)
        .execute();
      await expireSessions(database);

      const settled = await call(`/sandbox/payment-sessions/${id}/settle`, {});
      expect(settled.status).toBe(200);
      expect(settled.body.data).toMatchObject({ status: 'settled', payment: { status: 'settled' } });
      expect(await events(id)).toEqual(['payment.session.created', 'payment.session.succeeded']);
      expect(await list('status=settled')).toContain(id);
      expect(await list('status=captured')).not.toContain(id);
      const again = await call(`/sandbox/payment-sessions/${id}/settle`);
      expect(again.status).toBe(409);
      expect(again.body.error?.code).toBe('invalid_state');
    });

    it('by default it goes on to settled in the same request, with one succeeded event', async () => {
      const { id } = await captured('card');
      const done = await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' });
      expect(done.status).toBe(200);
      expect(done.body.data.payment.status).toBe('settled');
      expect(done.body.data.links.redirect_url).toBeTruthy();
      expect(await events(id)).toEqual(['payment.session.created', 'payment.session.succeeded']);
    });

    it('settling a pending session is refused (409), and nothing is written', async () => {
      const { id } = await captured('wallet');
      const res = await call(`/sandbox/payment-sessions/${id}/settle`);
      expect(res.status).toBe(409);
      expect(await events(id)).toEqual(['payment.session.created']);
    });
  });

  describe('expiry on demand', () => {
    it('fails a pending session now, as the sweeper would, with its event', async () => {
      const id = await create('bank_account');
      const before = Date.now();
      const res = await call(`/sandbox/payment-sessions/${id}/expire`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({
        status: 'failed',
        payment: { status: 'failed', cancellation_reason: 'expired' },
      });
      expect(Date.parse(res.body.data.expires_at)).toBeLessThanOrEqual(Date.now());
      expect(Date.parse(res.body.data.expires_at)).toBeGreaterThanOrEqual(before - 1000);
      expect(await events(id)).toEqual(['payment.session.created', 'payment.session.failed']);
      // Failed once: the sweeper finds nothing more to do, and a capture is a state conflict.
      expect(await expireSessions(database)).toBe(0);
      const capture = await call(`/payment-sessions/${id}`);
      expect(capture.status).toBe(409);
      expect(capture.body.error?.code).toBe('invalid_state');
      const again = await call(`/sandbox/payment-sessions/${id}/expire`);
      expect(again.status).toBe(409);
      expect(again.body.error?.code).toBe('invalid_state');
      expect(await events(id)).toEqual(['payment.session.created', 'payment.session.failed']);
    });

    it('expires a captured session still waiting for its customer', async () => {
      const { id } = await captured('etransfer');
      const res = await call(`/sandbox/payment-sessions/${id}/expire`, {});
      expect(res.body.data.payment).toMatchObject({ status: 'failed', cancellation_reason: 'expired' });
      const complete = await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' });
      expect(complete.status).toBe(409);
    });

    it('404 for an unknown session, another business, or a malformed id', async () => {
      const id = await create('bank_account');
      expect((await call(`/sandbox/payment-sessions/${crypto.randomUUID()}/expire`)).status).toBe(404);
      expect((await call(`/sandbox/payment-sessions/${id}/expire`, undefined, OTHER)).status).toBe(404);
      expect((await call('/sandbox/payment-sessions/nope/expire')).status).toBe(404);
      expect(await events(id)).toEqual(['payment.session.created']);
    });
  });

  it('refuses an outcome other than succeeded or failed once, listing the allowed values', async () => {
    const { id } = await captured('bank_account');
    const res = await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'maybe' });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({
      code: 'validation_failed',
      details: [{ field: 'outcome', message: 'must be one of succeeded, failed' }],
    });
    expect(await events(id)).toEqual(['payment.session.created']);
  });

  it('the sandbox API does not exist for live keys, whatever the body', async () => {
    const { id } = await captured('bank_account', LIVE);
    for (const [path, body] of [
      [`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' }],
      [`/sandbox/payment-sessions/${id}/complete`, { outcome: 'maybe' }],
      [`/sandbox/payment-sessions/${id}/settle`, undefined],
      [`/sandbox/payment-sessions/${id}/expire`, undefined],
    ] as const) {
      const res = await call(path, body, LIVE);
      expect(res.status, path).toBe(404);
      expect(res.body.error?.code).toBe('not_found');
    }
    expect(await events(id)).toEqual(['payment.session.created']);
  });
});
