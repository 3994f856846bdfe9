import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, classifyAddress, isPublicAddress, type Resolver } from '../src/index.js';

/** A resolver of the test's own: a fixed answer per name, never the network. */
const resolverOf =
  (answers: Record<string, string[]>): Resolver =>
  async (hostname) => {
    const found = answers[hostname];
    if (!found) throw new Error(`ENOTFOUND ${hostname}`);
    return found;
  };

describe('classifyAddress', () => {
  it.each([
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['[2a00:1450:4001:80b::200e]', 'public'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::808:808', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fec0::1', 'private'],
    ['169.254.169.254', 'link_local'],
    ['fe80::1', 'link_local'],
    ['100.64.0.1', 'carrier_nat'],
    ['100.127.255.255', 'carrier_nat'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.51.100.1', 'reserved'],
    ['203.0.113.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['64:ff9b:1::a00:1', 'reserved'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['::7f00:1', 'reserved'],
    ['2001::1', 'reserved'],
    ['100::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['fe80::1%eth0', 'invalid'],
    ['127.1', 'invalid'],
    ['not-an-ip', 'invalid'],
  ])('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it('isPublicAddress is classifyAddress === public', () => {
    expect(isPublicAddress('8.8.8.8')).toBe(true);
    expect(isPublicAddress('10.0.0.1')).toBe(false);
  });
});

describe('checkWebhookUrl', () => {
  const resolve = resolverOf({
    'merchant.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'localhost.example': ['127.0.0.1'],
    'v6-loopback.example': ['::1'],
    'metadata.example': ['169.254.169.254'],
    'ten.example': ['10.1.2.3'],
    'corp.example': ['172.20.0.5'],
    'home.example': ['192.168.0.10'],
    'cgnat.example': ['100.64.1.1'],
    'ula.example': ['fd00::5'],
    'mapped.example': ['::ffff:127.0.0.1'],
    'zero.example': ['0.0.0.0'],
    'mixed.example': ['93.184.216.34', '10.0.0.7'],
    'empty.example': [],
  });

  it.each([
    'https://merchant.example/webhooks/',
    'http://merchant.example:8080/hooks',
    'https://8.8.8.8/webhooks',
    'https://[2606:4700:4700::1111]/webhooks',
  ])('accepts %s and returns the vetted addresses', async (url) => {
    const check = await checkWebhookUrl(url, { resolve });
    expect(check.ok).toBe(true);
    expect(check.ok && check.addresses.every(isPublicAddress)).toBe(true);
  });

  it.each([
    'http://127.0.0.1/',
    'http://localhost.example/',
    'http://v6-loopback.example/',
    'http://metadata.example/latest/meta-data/',
    'http://ten.example/',
    'http://corp.example/',
    'http://home.example/',
    'http://cgnat.example/',
    'http://ula.example/',
    'http://mapped.example/',
    'http://zero.example/',
    'http://mixed.example/',
    'http://2130706433/',
    'http://017700000001/',
    'http://0x7f000001/',
    'http://0x7f.1/',
    'http://127.1/',
    'http://0177.0.0.1/',
    'http://0/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[0:0:0:0:0:ffff:127.0.0.1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[fe80::1]/',
    'http://169.254.169.254/',
    'http://[fd00::1]/',
    'http://10.0.0.1:8080/',
    'http://192.168.1.1/',
    'http://100.100.100.100/',
  ])('refuses %s as non_public_address', async (url) => {
    const check = await checkWebhookUrl(url, { resolve });
    expect(check).toMatchObject({ ok: false, code: 'non_public_address' });
  });

  it.each([
    ['not a url', 'invalid_url'],
    ['ftp://merchant.example/', 'unsupported_scheme'],
    ['file:///etc/passwd', 'unsupported_scheme'],
    ['https://user:pass@merchant.example/', 'credentials_in_url'],
    ['https://nowhere.example/', 'unresolvable_host'],
    ['https://empty.example/', 'unresolvable_host'],
    ['http://1.2.3.4.5/', 'invalid_url'],
  ])('refuses %s with %s', async (url, code) => {
    expect(await checkWebhookUrl(url, { resolve })).toMatchObject({ ok: false, code });
  });

  it('lets private addresses through with the development switch', async () => {
    expect(await checkWebhookUrl('http://127.0.0.1:3000/webhooks', { allowPrivate: true })).toMatchObject({
      ok: true,
      addresses: ['127.0.0.1'],
    });
  });

  it('explains which resolved address was refused', async () => {
    const check = await checkWebhookUrl('http://mixed.example/', { resolve });
    expect(check.ok).toBe(false);
    if (check.ok) return;
    expect(check.addresses).toEqual([
      { address: '93.184.216.34', class: 'public' },
      { address: '10.0.0.7', class: 'private' },
    ]);
    expect(check.message).toContain('10.0.0.7: private');
  });
});
