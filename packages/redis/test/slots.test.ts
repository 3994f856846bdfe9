import { describe, expect, it } from 'vitest';
import { keySlot } from '../src/cluster.js';
import { keyNames, tagKeys, tagsKey } from '../src/keys.js';

// The store's own slot function (src/cluster.ts), checked against the specification's values and
// against a real cluster's CLUSTER KEYSLOT in store-contract.test.ts.
const slot = keySlot;

describe('cluster slots', () => {
  it('computes slots as Redis does', () => {
    // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    // CRC16/XMODEM of "123456789" is 0x31c3 (the specification's check value).
    expect(slot('123456789')).toBe(0x31c3 % 16384);
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
