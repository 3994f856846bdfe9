import { describe, expect, it } from 'vitest';
import { eventTypeOf } from '../src/delivery/feed.js';
import { createAttemptFeed, type FedAttempt, signedPayload } from '../src/index.js';

const attempt = (n: number): FedAttempt => ({
  eventId: `e${n}`,
  eventType: 'payment.session.created',
  businessId: 'b',
  mode: 'test',
  deliveryId: `d${n}`,
  url: 'https://merchant.example/webhooks',
  attempt: 1,
  status: 'delivered',
  statusCode: 200,
  latencyMs: 3,
  errorCode: null,
  startedAt: new Date(0),
});

describe('the attempt feed', () => {
  it('is active only while someone listens, hands each batch to every subscriber, and survives one that throws', () => {
    const feed = createAttemptFeed();
    expect(feed.active).toBe(false);
    const seen: string[] = [];
    const stopA = feed.subscribe((batch) => seen.push(...batch.map((a) => `a:${a.eventId}`)));
    const stopThrower = feed.subscribe(() => {
      throw new Error('a closed stream');
    });
    const stopB = feed.subscribe((batch) => seen.push(...batch.map((a) => `b:${a.eventId}`)));
    expect(feed.active).toBe(true);
    feed.publish([attempt(1), attempt(2)]);
    feed.publish([]);
    expect(seen).toEqual(['a:e1', 'a:e2', 'b:e1', 'b:e2']);
    stopA();
    stopThrower();
    stopB();
    expect(feed.active).toBe(false);
    feed.publish([attempt(3)]);
    expect(seen).toHaveLength(4);
  });

  it("reads the event's name off a signed payload's end, and parses anything else", () => {
    const payment = { id: 'p1', note: '"event":"payment.session.failed"}' };
    const payload = signedPayload('payment.session.succeeded', payment as never, 'biz');
    expect(eventTypeOf(payload)).toBe('payment.session.succeeded');
    expect(eventTypeOf('{"data":{},"event":"payment.session.created"}')).toBe('payment.session.created');
    expect(eventTypeOf('{"event":"a.b","data":{"x":1}}')).toBe('a.b');
    expect(eventTypeOf('{"event":"<script>"}')).toBe('<script>');
    expect(eventTypeOf('not json')).toBe('unknown');
    expect(eventTypeOf('{"event":3}')).toBe('unknown');
  });
});
