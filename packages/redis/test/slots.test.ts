import { describe, expect, it } from 'vitest';
import { keyNames, tagKeys, tagsKey } from '../src/keys.js';

/** CRC16/XMODEM, the checksum Redis Cluster maps keys to slots with. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The cluster slot of a key: the CRC16 of its hash tag (between the first { and the next }), if any. */
function slot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % 16384;
}

describe('cluster slots', () => {
  it('computes slots as Redis does', () => {
    // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
    expect(slot('foo')).toBe(12182);
    expect(slot('{user1000}.following')).toBe(slot('{user1000}.followers'));
  });

  const businesses = ['3f6c2a8e-91d4-4b7a-a0c5-7e2d9b1f4c36', 'acct:with:colons', 'brace}d', 'é-unicode', ''];
  const checksum = 'ab'.repeat(32);

  it.each(businesses)(
    'every key a claim, renew, complete or fail script touches is in one slot (business %j)',
    (business) => {
      const k = keyNames('payhook:prod', `${business}:${checksum}`);
      expect(slot(k.record)).toBe(slot(k.leases));
    },
  );

  it.each(businesses)('every key the recover script touches is in one slot (business %j)', (business) => {
    const t = tagKeys('payhook:prod', business);
    const records = ['x', checksum, 'ff'.repeat(32)].map((member) => `${t.recordPrefix}${member}`);
    expect(new Set([t.leases, ...records].map(slot)).size).toBe(1);
  });

  it('spreads businesses over slots, and keeps the tags set apart', () => {
    const slots = new Set(businesses.map((b) => slot(keyNames('p', `${b}:${checksum}`).record)));
    expect(slots.size).toBeGreaterThan(1);
    expect(typeof slot(tagsKey('p'))).toBe('number');
  });
});
