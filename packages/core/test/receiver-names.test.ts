// What a receiver says about names and request fields it cannot use: a misspelled event name in
// on(), a known event that nobody handles, and a request object with fields handle() does not read.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createNodeRequest,
  createReceiver,
  type KnownEventName,
  type Logger,
  type Receiver,
  type ReceiverRequest,
  type ReceiverResult,
  writeResponse,
} from '../src/index.js';
import { createTestEvent, signEvent } from '../src/testing/index.js';

const BIZ = '3e9b7c1a-5d2f-4a6e-8b0c-9f1e2d3c4b5a';

/** A logger that keeps every warning, with its fields. */
function capture() {
  const warnings: { fields: Record<string, unknown>; msg: string }[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    error() {},
    warn: (fields, msg) => warnings.push({ fields: fields as Record<string, unknown>, msg: msg ?? '' }),
  };
  return { warnings, logger };
}

function receiverWith(logger: Logger): Receiver {
  return createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0, logger });
}

const request = (body: unknown): ReceiverRequest => ({
  method: 'POST',
  contentType: 'application/json',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(body),
});

/** Runs one event through the receiver as an adapter would, and waits for its handlers. */
async function deliver(receiver: Receiver, body: unknown): Promise<ReceiverResult> {
  const result = await receiver.handle(request(body));
  result.afterResponse?.();
  await receiver.idle();
  return result;
}

describe('event names in on()', () => {
  it.each([
    ['payment.session.succeded', 'payment.session.succeeded'],
    ['payment.sesison.created', 'payment.session.created'],
    ['Payment.Session.Failed', 'payment.session.failed'],
    ['payment.session.fail', 'payment.session.failed'],
  ])('warns about %s with "did you mean %s?"', (name, suggestion) => {
    const { warnings, logger } = capture();
    receiverWith(logger).on(name as KnownEventName, () => {});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain(`receiver.on('${name}')`);
    expect(warnings[0]?.msg).toContain(`did you mean '${suggestion}'?`);
    expect(warnings[0]?.fields).toEqual({ event: name, suggestion });
  });

  it('warns about a name far from every known one without a guess, and points to onUnknown', () => {
    const { warnings, logger } = capture();
    receiverWith(logger).on('payment.refund.created' as KnownEventName, () => {});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).not.toContain('did you mean');
    expect(warnings[0]?.msg).toContain("receiver.onUnknown('payment.refund.created', handler)");
    expect(warnings[0]?.fields).toEqual({ event: 'payment.refund.created' });
  });

  it('says nothing about known names, lists of them, or names given to onUnknown', () => {
    const { warnings, logger } = capture();
    receiverWith(logger)
      .on('payment.session.created', () => {})
      .on(['payment.session.succeeded', 'payment.session.failed'], () => {})
      .onUnknown('payment.refund.created', () => {})
      .onUnknown(['payout.completed'], () => {});
    expect(warnings).toEqual([]);
  });

  it('still refuses a name that is not a string at all', () => {
    const receiver = receiverWith(capture().logger);
    expect(() => receiver.on('' as KnownEventName, () => {})).toThrow(TypeError);
    expect(() => receiver.onUnknown([42 as unknown as string], () => {})).toThrow(/Invalid event name: 42/);
  });

  it('a misspelled handler never runs; the real event is warned about once per name, not per request', async () => {
    const { warnings, logger } = capture();
    const receiver = receiverWith(logger);
    const ran: string[] = [];
    receiver.on('payment.session.succeded' as KnownEventName, () => ran.push('misspelled'));
    receiver.on('payment.session.created', () => ran.push('created'));
    warnings.length = 0; // the registration's own warning, checked above
    for (let i = 0; i < 3; i++) {
      expect((await deliver(receiver, createTestEvent('payment.session.succeeded', BIZ))).status).toBe(200);
    }
    await deliver(receiver, createTestEvent('payment.session.failed', BIZ));
    await deliver(receiver, createTestEvent('payment.session.failed', BIZ));
    await deliver(receiver, createTestEvent('payment.session.created', BIZ));
    expect(ran).toEqual(['created']);
    expect(warnings.map((w) => w.fields.event)).toEqual([
      'payment.session.succeeded',
      'payment.session.failed',
    ]);
    expect(warnings[0]?.msg).toContain(
      "no handler is registered for it; register receiver.on('payment.session.succeeded', handler) or onAny",
    );

    // Once per receiver: another one warns for itself.
    const other = capture();
    const second = receiverWith(other.logger);
    await deliver(second, createTestEvent('payment.session.succeeded', BIZ));
    expect(other.warnings.map((w) => w.fields.event)).toEqual(['payment.session.succeeded']);
  });

  it('says nothing when onAny, the catch-all, takes a known event that has no handler of its own', async () => {
    const { warnings, logger } = capture();
    const receiver = receiverWith(logger);
    const seen: string[] = [];
    receiver.onAny((event) => seen.push(event.event));
    await deliver(receiver, createTestEvent('payment.session.failed', BIZ));
    expect(seen).toEqual(['payment.session.failed']);
    expect(warnings).toEqual([]);
  });
});

describe('onUnknown', () => {
  it('hands an authentic event of a name payhook does not know to its handler, as received, in silence', async () => {
    const { warnings, logger } = capture();
    const receiver = receiverWith(logger);
    const refunds: unknown[] = [];
    const unrecognized: string[] = [];
    receiver.onUnknown('payment.refund.created', (event, { key }) => {
      expect(key).toMatch(new RegExp(`^${BIZ}:`));
      refunds.push(event.data);
    });
    receiver.onUnrecognized(({ event, reason }) => unrecognized.push(`${event.event}:${reason}`));
    const result = await deliver(
      receiver,
      signEvent('payment.refund.created', { id: 'r_1', amount: 500 }, BIZ),
    );
    expect(result).toMatchObject({ status: 200, body: { received: true } });
    expect(refunds).toEqual([{ id: 'r_1', amount: 500 }]);
    expect(unrecognized).toEqual(['payment.refund.created:unknown_event']);
    expect(warnings).toEqual([]);
  });

  it('leaves another unknown name to the "not handled" warning, which names onUnknown', async () => {
    const { warnings, logger } = capture();
    const receiver = receiverWith(logger);
    receiver.onUnknown('payment.refund.created', () => {});
    await deliver(receiver, signEvent('payment.refund.failed', { id: 'r_2' }, BIZ));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain('payment.refund.failed acknowledged but not handled (unknown_event)');
    expect(warnings[0]?.msg).toContain("receiver.onUnknown('payment.refund.failed', handler)");
  });
});

describe('fields of receiver.handle()', () => {
  const ACCEPTED =
    'method, contentType, remoteAddress, clientIp, headers, forwardedFor, rawBody, readBody, parsedBody';

  it('refuses an unknown field with a TypeError naming it and listing the accepted ones', async () => {
    const receiver = receiverWith(capture().logger);
    const guessed = { ...request(createTestEvent('payment.session.created', BIZ)), ip: '127.0.0.1' };
    const refused = receiver.handle(guessed as ReceiverRequest);
    await expect(refused).rejects.toThrow(TypeError);
    await expect(refused).rejects.toThrow(
      `receiver.handle(): unknown field "ip"; expected one of: ${ACCEPTED}.`,
    );
  });

  it('names every unknown field, with a guess where one is close', async () => {
    const receiver = receiverWith(capture().logger);
    const guessed = {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
      'content-type': 'application/json',
      ip: '127.0.0.1',
    };
    await expect(receiver.handle(guessed as unknown as ReceiverRequest)).rejects.toThrow(
      `unknown fields "body" (did you mean "rawBody"?), "content-type" (did you mean "contentType"?), "ip"; expected one of: ${ACCEPTED}.`,
    );
  });

  it('refuses a request without method or without the contentType key, which used to be a 405 or a 415', async () => {
    const receiver = receiverWith(capture().logger);
    const body = JSON.stringify(createTestEvent('payment.session.created', BIZ));
    await expect(
      receiver.handle({ contentType: 'application/json', rawBody: body } as unknown as ReceiverRequest),
    ).rejects.toThrow(/"method" must be the request's HTTP method/);
    await expect(
      receiver.handle({
        method: 'POST',
        remoteAddress: '127.0.0.1',
        headers: { 'content-type': 'application/json' },
        rawBody: body,
      } as unknown as ReceiverRequest),
    ).rejects.toThrow(/missing field "contentType"/);
    await expect(receiver.handle(undefined as unknown as ReceiverRequest)).rejects.toThrow(
      'receiver.handle(): expected a request object, got undefined.',
    );
    // A contentType that is there but undefined is the request's own: 415, as before.
    const untyped = await receiver.handle({
      method: 'POST',
      contentType: undefined,
      remoteAddress: '::1',
      rawBody: body,
    });
    expect(untyped).toMatchObject({ status: 415, body: { error: { code: 'unsupported_media_type' } } });
  });

  it('records nothing for a refused request object: the same event, described right, is accepted', async () => {
    const receiver = receiverWith(capture().logger);
    const event = createTestEvent('payment.session.created', BIZ);
    const handled: string[] = [];
    receiver.on('payment.session.created', (e) => handled.push(e.checksum));
    await expect(receiver.handle({ ...request(event), ip: '::1' } as ReceiverRequest)).rejects.toThrow(
      TypeError,
    );
    const result = await deliver(receiver, event);
    expect(result.body).toEqual({ received: true });
    expect(handled).toEqual([event.checksum]);
  });

  describe('over HTTP', () => {
    let server: Server | undefined;
    afterEach(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    });

    it('accepts every field the adapters build with createNodeRequest', async () => {
      const receiver = receiverWith(capture().logger);
      const handled: string[] = [];
      receiver.on('payment.session.succeeded', (event) => handled.push(event.event));
      const toRequest = createNodeRequest<import('node:http').IncomingMessage>({
        incoming: (req) => req,
        clientIp: (req) => req.socket.remoteAddress,
        rawBody: () => undefined,
        parsedBody: () => undefined,
      });
      server = createServer((req, res) => {
        receiver.handle(toRequest(req)).then(
          (result) => writeResponse(res, result),
          (error: unknown) => res.writeHead(500).end(String(error)),
        );
      });
      await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(createTestEvent('payment.session.succeeded', BIZ)),
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ received: true });
      await receiver.idle();
      expect(handled).toEqual(['payment.session.succeeded']);
    });
  });
});
