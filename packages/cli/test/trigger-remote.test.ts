// @module-tag process
// @module-tag build
// @module-tag pglite
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApiKey, loadConfig, type SenderService, startSender } from '@payhook/sender';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../../test/support/fault-proxy.js';
import { freePort } from '../../../test/support/free-port.js';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { payhookCli, startTriggerReceiver } from './run-cli.js';

const BIZ = 'biz_trigger_remote';
/** A key the sender's configuration holds as a live one, though it looks like a test key. */
const HELD_AS_LIVE = 'sk_test_held_as_live_by_the_configuration';
/** The CLI's environment, without what a developer's shell may carry. */
const ENV = { NO_COLOR: '1', PAYHOOK_API_KEY: '' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Listed = { id: string; type: string; payment_id: string };

// `payhook trigger --base-url`: the built command against a real sender (PGlite in a temporary
// directory), checked through the sender's own API.
// Real processes (a sender on PGlite, the command): a generous bound, which a hang still reaches.
describe('payhook trigger --base-url', { timeout: 300_000 }, () => {
  let dir: string;
  let sender: SenderService;
  let base: string;
  let key: string;
  let liveKey: string;

  /** `GET path` on the sender with `apiKey` (the test key by default): the answer's JSON. */
  const get = async (path: string, apiKey = key) => {
    const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(res.status, path).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read by the assertions
    return (await res.json()) as any;
  };
  /** Every event of the test key's business, oldest first. */
  const allEvents = async (apiKey = key): Promise<Listed[]> =>
    (await get('/events?limit=100', apiKey)).data.reverse();
  /** The events of one payment, oldest first. */
  const eventsOf = async (paymentId: string): Promise<Listed[]> =>
    (await get(`/events?payment_id=${paymentId}&limit=100`)).data.reverse();
  const trigger = (args: string[], env: Record<string, string> = {}) =>
    payhookCli(['trigger', ...args], { env: { ...ENV, ...env } });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-trigger-remote-'));
    await copyPgliteTemplate(join(dir, 'data'));
    sender = await startSender({
      config: loadConfig({
        PORT: '0',
        PAYHOOK_DATA_DIR: join(dir, 'data'),
        PAYHOOK_API_KEYS: `${HELD_AS_LIVE}:${BIZ}:live`,
      }),
      logger: false,
    });
    base = sender.url;
    key = await createApiKey(sender.database.db, { businessId: BIZ, mode: 'test' });
    liveKey = await createApiKey(sender.database.db, { businessId: BIZ, mode: 'live' });
  }, 90_000);

  afterAll(async () => {
    await sender?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    {
      event: 'payment.session.created',
      lines: [],
      types: ['payment.session.created'],
      status: 'pending',
    },
    {
      event: 'payment.session.succeeded',
      lines: [
        'Captured it (bank account)',
        'Completed it through the sandbox: settled (payment.session.succeeded)',
      ],
      types: ['payment.session.created', 'payment.session.succeeded'],
      status: 'settled',
    },
    {
      event: 'payment.session.failed',
      lines: [
        'Captured it (bank account)',
        'Completed it through the sandbox: failed (payment.session.failed)',
      ],
      types: ['payment.session.created', 'payment.session.failed'],
      status: 'failed',
    },
  ])(
    '$event: makes the events of one payment on the sender and prints each call and event',
    async ({ event, lines, types, status }) => {
      const before = await allEvents();
      const run = await trigger([event, '--base-url', base, '--api-key', key]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toBe('');
      const paymentId = /^Created payment session (\S+) \(payment\.session\.created\)$/m.exec(
        run.stdout,
      )?.[1];
      expect(paymentId).toMatch(UUID);

      // The sender has the events, of this payment only, in the order they were made.
      const made = (await allEvents()).slice(before.length);
      expect(made.map((e) => e.type)).toEqual(types);
      expect(new Set(made.map((e) => e.payment_id))).toEqual(new Set([paymentId]));
      expect((await eventsOf(paymentId as string)).map((e) => e.id)).toEqual(made.map((e) => e.id));
      expect((await get(`/payments/${paymentId}`)).data.status).toBe(status);

      expect(run.stdout).toBe(
        [
          `Created payment session ${paymentId} (payment.session.created)`,
          ...lines,
          ...made.map((e) => `  event ${e.type} ${e.id}`),
          'The sender delivers these events to your registered webhook URLs and to every `payhook listen`.',
          '',
        ].join('\n'),
      );
    },
  );

  it('--json: the payment, its events with their ids, and every call with its status', async () => {
    for (const [event, method, types, calls] of [
      ['payment.session.created', 'etransfer', ['payment.session.created'], 2],
      ['payment.session.succeeded', 'card', ['payment.session.created', 'payment.session.succeeded'], 4],
      ['payment.session.failed', 'crypto_address', ['payment.session.created', 'payment.session.failed'], 4],
    ] as const) {
      const run = await trigger([event, '--base-url', base, '--api-key', key, '--method', method, '--json']);
      expect(run.code, run.stderr).toBe(0);
      const answer = JSON.parse(run.stdout);
      const id = answer.payment_id;
      expect(id).toMatch(UUID);
      const listed = await eventsOf(id);
      expect(listed.map((e) => e.type)).toEqual(types);
      expect(answer).toEqual({
        payment_id: id,
        events: listed.map((e) => ({ id: e.id, type: e.type })),
        calls: [
          { method: 'POST', path: '/payment-sessions', status: 201 },
          ...(calls === 4
            ? [
                { method: 'POST', path: `/payment-sessions/${id}`, status: 200 },
                { method: 'POST', path: `/sandbox/payment-sessions/${id}/complete`, status: 200 },
              ]
            : []),
          { method: 'GET', path: `/events?payment_id=${id}&limit=100`, status: 200 },
        ],
      });
      expect((await get(`/payments/${id}`)).data.payment_method?.type ?? method).toBe(method);
    }
  });

  it('takes the key from PAYHOOK_API_KEY, and keeps a path on the base URL', async () => {
    const run = await trigger(['payment.session.created', '--base-url', `${base}/`, '--json'], {
      PAYHOOK_API_KEY: key,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).events.map((e: Listed) => e.type)).toEqual(['payment.session.created']);

    // A path the sender does not serve: the API's 404, and a word on --base-url.
    const prefixed = await trigger([
      'payment.session.created',
      '--base-url',
      `${base}/payhook`,
      '--api-key',
      key,
    ]);
    expect(prefixed.code).toBe(1);
    expect(prefixed.stderr).toContain('the sender refused POST /payment-sessions: 404 not_found');
    expect(prefixed.stderr).toContain('Is --base-url the address of a payhook sender');
  });

  it('a POST whose answer is lost is sent again under the same Idempotency-Key: one session, not two', async () => {
    // A proxy of the test's own that lets the first POST /payment-sessions reach the sender, then
    // cuts the connection instead of passing the answer on.
    const seen: { method: string; path: string; key: string | undefined }[] = [];
    let cut = false;
    const proxy: Server = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
      seen.push({ method: req.method as string, path: req.url as string, key: idempotencyKey });
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'idempotency-key', 'accept']) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const upstream = await fetch(`${base}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      if (!cut && req.method === 'POST' && req.url === '/payment-sessions') {
        cut = true;
        req.socket.destroy();
        return;
      }
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? '' });
      res.end(body);
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    try {
      const before = await allEvents();
      const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const run = await trigger([
        'payment.session.succeeded',
        '--base-url',
        proxied,
        '--api-key',
        key,
        '--json',
      ]);
      expect(run.code, run.stderr).toBe(0);
      const creates = seen.filter((s) => s.method === 'POST' && s.path === '/payment-sessions');
      expect(creates).toHaveLength(2);
      expect(creates[0]?.key).toMatch(UUID);
      expect(creates[1]?.key).toBe(creates[0]?.key);
      // Every POST had a key of its own.
      const keys = seen.filter((s) => s.method === 'POST').map((s) => s.key);
      expect(new Set(keys).size).toBe(3);
      const made = (await allEvents()).slice(before.length);
      expect(made.map((e) => e.type)).toEqual(['payment.session.created', 'payment.session.succeeded']);
      expect(JSON.parse(run.stdout).payment_id).toBe(made[0]?.payment_id);
    } finally {
      proxy.closeAllConnections();
      proxy.close();
    }
  });

  it('refuses keys that are not test keys: a live key before any call (2), a key the sender holds as live at the sandbox (1)', async () => {
    const liveEvents = (await allEvents(liveKey)).length;
    const live = await trigger(['payment.session.succeeded', '--base-url', base, '--api-key', liveKey]);
    expect(live.code).toBe(2);
    expect(live.stdout).toBe('');
    expect(live.stderr).toContain('This is a live key');
    expect(live.stderr).toContain('takes test keys only (sk_test_...)');
    expect(live.stderr).toContain('a live key would make a real payment session');
    // Nothing was made in live mode.
    expect(await allEvents(liveKey)).toHaveLength(liveEvents);

    // A key that looks like a test key but is live on this sender: the sandbox answers 404, and
    // the message says what to do.
    const held = await trigger(['payment.session.succeeded', '--base-url', base, '--api-key', HELD_AS_LIVE]);
    expect(held.code).toBe(1);
    expect(held.stderr).toMatch(
      /the sender refused POST \/sandbox\/payment-sessions\/\S+\/complete: 404 not_found: No route POST/,
    );
    expect(held.stderr).toContain('The sandbox routes exist for test-mode keys only');
    expect(held.stderr).toContain('trigger needs a test-mode key');
    expect(held.stderr).toMatch(/Already done: created payment session \S+, captured it\./);

    const unknown = await trigger([
      'payment.session.created',
      '--base-url',
      base,
      '--api-key',
      'sk_test_nobody',
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('the sender refused POST /payment-sessions: 401 unauthorized');
    expect(unknown.stderr).toContain('Check --api-key (or PAYHOOK_API_KEY)');
  });

  it('exits 3 naming the URL when the sender cannot be reached, or does not answer within 15 s', async () => {
    const away = `http://127.0.0.1:${await freePort()}`;
    const refused = await trigger(['payment.session.created', '--base-url', away, '--api-key', key]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`Could not reach the sender at ${away}: ECONNREFUSED.`);
    expect(refused.stderr).toContain('Is it running?');

    const proxy = await startProxy({ host: '127.0.0.1', port: Number(new URL(base).port) }, 'http');
    proxy.blackhole();
    try {
      const started = Date.now();
      const silent = await trigger(['payment.session.created', '--base-url', proxy.url, '--api-key', key]);
      expect(silent.code).toBe(3);
      expect(silent.stderr).toContain(`Could not reach the sender at ${proxy.url}: no answer within 15 s.`);
      expect(Date.now() - started).toBeGreaterThanOrEqual(15_000);
    } finally {
      await proxy.close();
    }
  });

  it('usage errors (2): flags of the other mode, events the sender does not make, methods it cannot take', async () => {
    const before = (await allEvents()).length;
    for (const [args, message] of [
      [
        ['--to', 'http://127.0.0.1:3000/webhooks/'],
        '--to is for sending a signed event straight to a receiver',
      ],
      [['--business-id', BIZ], '--business-id is for sending a signed event straight to a receiver'],
      [['--secret', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], '--secret is for sending a signed event'],
      [['--allow-unknown-event'], 'a sender only sends the events it makes'],
      [['--method', 'none'], '--method "none" cannot make a session on a sender'],
    ] as [string[], string][]) {
      const run = await trigger(['payment.session.created', '--base-url', base, '--api-key', key, ...args]);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toContain(message);
    }
    const mixed = await trigger([
      'payment.session.created',
      '--base-url',
      base,
      '--api-key',
      key,
      '--to',
      base,
    ]);
    expect(mixed.stderr).toContain(
      '--base-url and --api-key make the event on a sender instead (with --method)',
    );

    const unknown = await trigger([
      'payment.refund.created',
      '--base-url',
      base,
      '--api-key',
      key,
      '--allow-unknown-event',
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('a sender only sends the events it makes');
    const typo = await trigger(['payment.sesion.succeeded', '--base-url', base, '--api-key', key]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('Did you mean payment.session.succeeded? A sender makes');

    const noKey = await trigger(['payment.session.created', '--base-url', base]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('--api-key (or PAYHOOK_API_KEY) is required with --base-url');
    // Without --base-url: the sender `payhook serve` runs by default, as for endpoints and listen;
    // these refusals come after the URL is taken, and before anything is sent to it.
    const noBaseLive = await trigger(['payment.session.created', '--api-key', liveKey]);
    expect(noBaseLive.code).toBe(2);
    expect(noBaseLive.stderr).toContain('This is a live key: trigger on a sender completes payments');
    const noBaseMethod = await trigger(['payment.session.created', '--api-key', key, '--method', 'none']);
    expect(noBaseMethod.code).toBe(2);
    expect(noBaseMethod.stderr).toContain('--method "none" cannot make a session on a sender');
    const notHttp = await trigger([
      'payment.session.created',
      '--base-url',
      'ftp://example',
      '--api-key',
      key,
    ]);
    expect(notHttp.code).toBe(2);
    // None of them called the sender.
    expect(await allEvents()).toHaveLength(before);
  });

  it('makes the event on the default sender with PAYHOOK_API_KEY set and no flag of either mode', async () => {
    // Nothing of this test listens there: the run goes to the sender's mode and names its address
    // (unreachable, exit 3), instead of asking for --to.
    const run = await trigger(['payment.session.created'], { PAYHOOK_API_KEY: key });
    expect(run.stderr).not.toContain('--to');
    expect(`${run.stdout}${run.stderr}`).toContain('http://127.0.0.1:8080');
    // A flag of the receiver mode keeps that mode: what it lacks is --to, said as such.
    const receiverMode = await trigger(['payment.session.created', '--business-id', BIZ], {
      PAYHOOK_API_KEY: key,
    });
    expect(receiverMode.code).toBe(2);
    expect(receiverMode.stderr).toContain('--to (or --api-key, to make the event on a sender) is required');
  });

  it('leaves the receiver mode as it was, with PAYHOOK_API_KEY set or not', async () => {
    const receiver = await startTriggerReceiver({ businessIds: [BIZ] });
    try {
      const run = await trigger(['payment.session.succeeded', '--to', receiver.url, '--business-id', BIZ], {
        PAYHOOK_API_KEY: key,
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^payment\.session\.succeeded -> http:\S+\n200 OK\n/);
      expect(receiver.handled).toEqual(['payment.session.succeeded']);
    } finally {
      receiver.close();
    }
  });

  it('--help shows both modes, with examples', async () => {
    const help = await payhookCli(['trigger', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('payhook trigger <event> --api-key <sk_test_...> [--base-url <sender>]');
    expect(help.stdout).toMatch(/--base-url <url> +the sender +default: http:\/\/127\.0\.0\.1:8080\n/);
    expect(help.stdout).toContain('Options (to a receiver):');
    expect(help.stdout).toContain('Options (on a sender):');
    expect(help.stdout).toContain('payhook trigger payment.session.succeeded --api-key sk_test_...');
    expect(help.stdout).toContain('The local loop, in two terminals:');
  });
});
