import { describe, expect, it } from 'vitest';
import type { Claim } from '../src/delivery/delivery-state.js';
import { HeldClaims } from '../src/delivery/held-claims.js';

const claimOf = (id: number, url: string): Claim => ({
  id: `d${id}`,
  token: `t${id}`,
  event_id: `e${id}`,
  url,
  attempts: 0,
  first_attempt_at: null,
  payload: '{}',
  business_id: 'b',
  mode: 'test',
  event_created_at: new Date(0),
  endpoint_id: null,
});

describe('HeldClaims', () => {
  it('gives a URL its room back when the rows held ready for it are dropped (released to other instances)', () => {
    const begun: Claim[] = [];
    const held = new HeldClaims({
      concurrency: 32,
      perUrl: 1,
      now: () => new Date(0),
      begin: (c) => begun.push(c),
    });
    const url = 'https://a.example/hooks';
    // Four rows (the URL's whole room, 4 per slot), none begun yet.
    const claims = [1, 2, 3, 4].map((n) => claimOf(n, url));
    expect(held.hold(claims, new Map(), 0, false)).toEqual([]);
    expect(held.claimFilter(0, 60_000).paced.map((p) => p.url)).toEqual([url]);

    expect(held.dropReady()).toEqual(claims);
    const { paced, rooms } = held.claimFilter(0, 60_000);
    expect(paced).toEqual([]);
    expect(rooms.get(url)).toBeUndefined();
    expect(held.claims()).toEqual([]);
    // Held again, the rows are all taken: nothing left over from before counts against them.
    expect(held.hold(claims, new Map(), 0, false)).toEqual([]);
  });

  it('sends to a URL only as many at once as its slots here, and holds none where it has no slot', () => {
    const begun: Claim[] = [];
    const slots = new Map([
      ['https://two.example/', 2],
      ['https://none.example/', 0],
    ]);
    const held = new HeldClaims({
      concurrency: 32,
      perUrl: 4,
      now: () => new Date(0),
      begin: (c) => {
        begun.push(c);
        held.slotTaken(c);
      },
      slots: (url) => slots.get(url) ?? 4,
    });
    const two = [1, 2, 3, 4, 5].map((n) => claimOf(n, 'https://two.example/'));
    const none = [claimOf(9, 'https://none.example/')];
    // The row of a URL without a slot here is given back at once.
    expect(held.hold([...two, ...none], new Map(), 0, false)).toEqual(none);
    held.startReady();
    expect(begun.map((c) => c.id)).toEqual(['d1', 'd2']);
    held.free(two[0] as Claim);
    held.startReady();
    expect(begun.map((c) => c.id)).toEqual(['d1', 'd2', 'd3']);
  });
});
