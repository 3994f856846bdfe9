import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { createDeliveryClient, type DeliveryClient } from '../src/delivery/http-client.js';
import { checkWebhookUrl, type Resolver } from '../src/net/webhook-url.js';

// The delivery client must never connect to a non-public address. Every URL below carries the port
// of a loopback listener (127.0.0.1 and ::1 on the same port), so a guard that let one through would
// show up as a connection there. Nothing here connects anywhere but loopback: names resolve through
// the test's own resolver, and for every refused URL the test first asserts that the attempt-time
// check (the send's first step, same resolver) refuses it, so a private answer such as 10.0.0.1 is
// never dialled even if the client were broken.

/** A loopback listener that counts the TCP connections and requests it receives. */
const listen = (host: string, port: number) =>
  startLoopbackReceiver({ host, port, record: false, respond: { status: 200, body: '{"received":true}' } });

/** Listeners on 127.0.0.1 and ::1 sharing one port (retried if ::1 already has that port taken). */
async function listenOnBothLoopbacks(): Promise<{
  v4: LoopbackReceiver;
  v6: LoopbackReceiver;
  port: number;
}> {
  for (let tries = 0; tries < 20; tries++) {
    const v4 = await listen('127.0.0.1', 0);
    try {
      return { v4, v6: await listen('::1', v4.port), port: v4.port };
    } catch {
      await v4.close();
    }
  }
  throw new Error('no port free on both 127.0.0.1 and ::1');
}

let v4: LoopbackReceiver;
let v6: LoopbackReceiver;
let port: number;
const clients: DeliveryClient[] = [];

beforeAll(async () => {
  ({ v4, v6, port } = await listenOnBothLoopbacks());
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await Promise.all([v4.close(), v6.close()]);
});

const seen = () => ({ connections: v4.connections + v6.connections, requests: v4.requests + v6.requests });

/** Fixed answers per name: the network's DNS is never asked. */
const answers: Record<string, string[]> = {
  'loopback4.test': ['127.0.0.1'],
  'loopback4.test.': ['127.0.0.1'],
  'loopback-other.test': ['127.0.0.2'],
  'loopback6.test': ['::1'],
  localhost: ['127.0.0.1', '::1'],
  'metadata.test': ['169.254.169.254'],
  'metadata6.test': ['fd00:ec2::254'],
  'ten.test': ['10.0.0.1'],
  'ten-high.test': ['10.255.255.254'],
  'corp.test': ['172.16.0.1'],
  'corp-high.test': ['172.31.255.254'],
  'home.test': ['192.168.1.1'],
  'cgnat.test': ['100.64.0.1'],
  'cgnat-high.test': ['100.127.255.254'],
  'ula.test': ['fc00::1'],
  'ula-fd.test': ['fd12:3456:789a::1'],
  'link-local6.test': ['fe80::1'],
  'mapped.test': ['::ffff:127.0.0.1'],
  'mapped-hex.test': ['::ffff:7f00:1'],
  'mapped-private.test': ['::ffff:10.0.0.1'],
  'nat64.test': ['64:ff9b::7f00:1'],
  '6to4.test': ['2002:7f00:1::'],
  'zero.test': ['0.0.0.0'],
  'unspecified6.test': ['::'],
  'multicast.test': ['224.0.0.1'],
  'broadcast.test': ['255.255.255.255'],
  'mixed.test': ['93.184.216.34', '127.0.0.1'],
  'mixed-private.test': ['8.8.8.8', '10.1.2.3'],
  'mixed6.test': ['2606:4700::1111', '::1'],
  'public.test': ['93.184.216.34'],
  'public6.test': ['2606:2800:220:1:248:1893:25c8:1946'],
};
const resolve: Resolver = async (hostname) => {
  const found = answers[hostname];
  if (!found) throw new Error(`ENOTFOUND ${hostname}`);
  return found;
};

const refusedNames = [
  'loopback4.test',
  'LOOPBACK4.test',
  'loopback4.test.',
  'loopback-other.test',
  'loopback6.test',
  'localhost',
  'metadata.test',
  'metadata6.test',
  'ten.test',
  'ten-high.test',
  'corp.test',
  'corp-high.test',
  'home.test',
  'cgnat.test',
  'cgnat-high.test',
  'ula.test',
  'ula-fd.test',
  'link-local6.test',
  'mapped.test',
  'mapped-hex.test',
  'mapped-private.test',
  'nat64.test',
  '6to4.test',
  'zero.test',
  'unspecified6.test',
  'multicast.test',
  'broadcast.test',
  'mixed.test',
  'mixed-private.test',
  'mixed6.test',
];

// Literals only in forms that land on loopback or the unspecified address (which Linux connects
// to loopback): a broken guard would hit the listeners, never a machine elsewhere.
const refusedLiterals = [
  '127.0.0.1',
  '127.0.0.1.',
  '127.1',
  '127.0.1',
  '2130706433',
  '017700000001',
  '0x7f000001',
  '0x7f.1',
  '0x7f.0.0.1',
  '0177.0.0.1',
  '0177.1',
  '0x7F.0x0.0x0.0x1',
  '[::1]',
  '[0:0:0:0:0:0:0:1]',
  '[0000::0001]',
  '[::ffff:7f00:1]',
  '[::ffff:127.0.0.1]',
  '[0:0:0:0:0:ffff:127.0.0.1]',
  '[::FFFF:7F00:0001]',
  '[64:ff9b::7f00:1]',
  '[64:ff9b::127.0.0.1]',
  '[2002:7f00:1::]',
  '0.0.0.0',
  '0',
  '0x0',
  '[::]',
];

describe('the SSRF guard refuses non-public targets without connecting', () => {
  const client = createDeliveryClient({ resolve });
  clients.push(client);

  it.each([...refusedNames, ...refusedLiterals])('http://%s:<port>/ is non_public_address', async (host) => {
    const url = `http://${host}:${port}/webhooks/`;
    // The send's own first step; asserted here so that no private address is ever dialled.
    expect(await checkWebhookUrl(url, { resolve })).toMatchObject({ ok: false, code: 'non_public_address' });
    const outcome = await client.send({ url, body: '{}' });
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: null,
      responseBody: null,
      error: { code: 'non_public_address' },
    });
    expect(outcome.error?.message).toMatch(/non-public/);
    // ... and says how to allow it for local development.
    expect(outcome.error?.message).toContain('payhook serve --allow-private-webhooks');
    expect(seen()).toEqual({ connections: 0, requests: 0 });
  });

  it('refuses https the same way', async () => {
    const outcome = await client.send({ url: `https://loopback4.test:${port}/`, body: '{}' });
    expect(outcome.error?.code).toBe('non_public_address');
    expect(seen()).toEqual({ connections: 0, requests: 0 });
  });

  it.each([
    ['ftp://127.0.0.1/', 'unsupported_scheme'],
    ['file:///etc/passwd', 'unsupported_scheme'],
    ['gopher://127.0.0.1/', 'unsupported_scheme'],
    ['http://user:pass@public.test/', 'credentials_in_url'],
    ['http://nowhere.test/', 'unresolvable_host'],
    ['http://[::1/', 'invalid_url'],
    ['http://127.0.0.1.1/', 'invalid_url'],
  ])('refuses %s with %s', async (url, code) => {
    const outcome = await client.send({ url, body: '{}' });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code } });
    expect(seen()).toEqual({ connections: 0, requests: 0 });
  });
});

describe('public addresses pass the check', () => {
  // Check only: nothing is sent to these.
  it.each([
    'https://8.8.8.8/webhooks/',
    'https://1.1.1.1/webhooks/',
    'https://[2606:4700::1111]/webhooks/',
    'https://[2606:4700:4700::1111]/webhooks/',
    'https://[::ffff:8.8.8.8]/webhooks/',
    'https://[64:ff9b::808:808]/webhooks/',
    'https://public.test/webhooks/',
    'https://public6.test/webhooks/',
    'http://public.test:8080/webhooks/',
  ])('%s', async (url) => {
    expect(await checkWebhookUrl(url, { resolve })).toMatchObject({ ok: true });
  });
});

describe('DNS rebinding', () => {
  // The name looks public when the attempt checks it and points at loopback when the socket looks
  // it up: only the connect-time lookup can catch it.
  it.each([
    [['127.0.0.1']],
    [['::1']],
    [['::ffff:127.0.0.1']],
    [['0.0.0.0']],
    // Several answers, all loopback: a public one here would be dialled if the hook ever broke.
    [['127.0.0.1', '::1']],
  ])('a name that rebinds to %j is refused at connect time', async (later) => {
    const calls: string[] = [];
    const rebinding: Resolver = async (hostname) => {
      calls.push(hostname);
      return calls.length === 1 ? ['93.184.216.34'] : later;
    };
    const client = createDeliveryClient({ resolve: rebinding });
    clients.push(client);
    const outcome = await client.send({ url: `http://rebind.test:${port}/webhooks/`, body: '{}' });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code: 'non_public_address' } });
    expect(outcome.error?.message).toContain('connect time');
    // The attempt's check, then the socket's lookup: the connection never used a third answer.
    expect(calls).toEqual(['rebind.test', 'rebind.test']);
    expect(seen()).toEqual({ connections: 0, requests: 0 });
  });
});

describe('allowPrivate', () => {
  it.each([
    'http://loopback4.test:%d/webhooks/',
    'http://loopback6.test:%d/webhooks/',
    'http://127.0.0.1:%d/webhooks/',
    'http://[::1]:%d/webhooks/',
  ])('delivers to %s', async (template) => {
    const listeners = await listenOnBothLoopbacks();
    const client = createDeliveryClient({ resolve, allowPrivate: true });
    clients.push(client);
    try {
      const outcome = await client.send({ url: template.replace('%d', String(listeners.port)), body: '{}' });
      expect(outcome).toMatchObject({ ok: true, statusCode: 200, responseBody: '{"received":true}' });
      expect(listeners.v4.requests + listeners.v6.requests).toBe(1);
    } finally {
      await Promise.all([listeners.v4.close(), listeners.v6.close()]);
    }
  });

  it('still refuses what is not an address at all', async () => {
    const client = createDeliveryClient({ resolve: async () => ['not-an-ip'], allowPrivate: true });
    clients.push(client);
    const outcome = await client.send({ url: `http://broken-dns.test:${port}/`, body: '{}' });
    expect(outcome.ok).toBe(false);
    expect(seen()).toEqual({ connections: 0, requests: 0 });
  });
});
