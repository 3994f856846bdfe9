import fc from 'fast-check';
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

describe('HeldClaims: its counts keep their invariants through any sequence of the worker’s calls', () => {
  type Step =
    | { kind: 'hold'; urls: number[] }
    | { kind: 'start' }
    | { kind: 'free'; pick: number }
    | { kind: 'finish'; pick: number }
    | { kind: 'drop' };
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({ kind: fc.constant('hold' as const), urls: fc.array(fc.nat(3), { maxLength: 12 }) }),
    fc.constant({ kind: 'start' as const }),
    fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }),
    fc.constant({ kind: 'drop' as const }),
  );

  it('sends within the limits; counts what is held, ready, sent and begun; offers room only in batches', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const concurrency = 4;
        const perUrl = 2;
        const sending: Claim[] = [];
        const recording: Claim[] = [];
        let next = 0;
        const held: HeldClaims = new HeldClaims({
          concurrency,
          perUrl,
          now: () => new Date(0),
          begin: (c) => {
            held.slotTaken(c);
            held.began(c, Promise.resolve());
            sending.push(c);
          },
        });
        let begun = 0;
        for (const s of steps) {
          if (s.kind === 'hold') {
            // As the worker claims: at most the room offered, within the rooms of the URLs held.
            const room = held.roomToClaim();
            const { rooms } = held.claimFilter(0, 60_000);
            const claims = s.urls.slice(0, room).map((u) => claimOf(next++, `https://u${u}.example/`));
            held.hold(claims, rooms, 0, false);
          } else if (s.kind === 'start') held.startReady();
          else if (s.kind === 'free' && sending.length > 0) {
            const [c] = sending.splice(s.pick % sending.length, 1) as [Claim];
            held.free(c);
            recording.push(c);
          } else if (s.kind === 'finish' && recording.length > 0) {
            const [c] = recording.splice(s.pick % recording.length, 1) as [Claim];
            held.finished(c);
          } else if (s.kind === 'drop') held.dropReady();

          // The limits: the worker's, and each URL's.
          expect(held.sendingCount).toBe(sending.length);
          expect(held.sendingCount).toBeLessThanOrEqual(concurrency);
          const perUrlSending = new Map<string, number>();
          for (const c of sending) perUrlSending.set(c.url, (perUrlSending.get(c.url) ?? 0) + 1);
          for (const n of perUrlSending.values()) expect(n).toBeLessThanOrEqual(perUrl);
          // What is held is what is ready and what was begun and is not finished.
          expect(held.activeCount).toBe(sending.length + recording.length);
          expect(held.heldCount).toBe(held.readyCount + held.activeCount);
          expect(held.claims()).toHaveLength(held.heldCount);
          expect(held.readyCount + held.sendingCount).toBeLessThanOrEqual(held.capacity);
          // Begun only grows, by the attempts started.
          expect(held.begunCount).toBeGreaterThanOrEqual(begun);
          begun = held.begunCount;
          // Room for a claim: never past the capacity, and a batch's worth unless nothing is busy.
          const room = held.roomToClaim();
          const busy = held.sendingCount + held.readyCount;
          expect(room).toBeLessThanOrEqual(held.capacity - busy);
          if (room > 0 && busy > 0) expect(room).toBeGreaterThanOrEqual(held.refill);
          if (busy === 0) expect(room).toBe(held.capacity);
        }
      }),
      { numRuns: 300 },
    );
  });
});
