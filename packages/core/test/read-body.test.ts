import { EventEmitter } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { writeThenRead } from '../../../test/support/raw-http.js';
import { isPayhookError, readRawBody, runAfterResponse } from '../src/index.js';
import {
  DEFAULT_MAX_DRAIN_BYTES,
  defaultMaxDrainBytes,
  resolveMaxDrainBytes,
} from '../src/receiver/read-body.js';

/** A request body stream with headers, as readRawBody reads it. */
function request(headers: Record<string, string> = {}) {
  return Object.assign(new PassThrough(), { headers });
}

async function refusal(promise: Promise<unknown>): Promise<{ code: string; cause: unknown }> {
  try {
    await promise;
  } catch (error) {
    if (isPayhookError(error)) return { code: error.code, cause: error.cause };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('readRawBody', () => {
  it('reads a body of one chunk or several into one Buffer', async () => {
    const one = request();
    const read = readRawBody(one, 100);
    one.end('{"a":1}');
    expect((await read).toString()).toBe('{"a":1}');

    const several = request();
    const readSeveral = readRawBody(several, 100);
    several.write('{"a"');
    several.write(':');
    several.end('1}');
    expect((await readSeveral).toString()).toBe('{"a":1}');
  });

  it('refuses a declared Content-Length over the limit before reading, and discards the rest', async () => {
    const req = request({ 'content-length': '101' });
    expect((await refusal(readRawBody(req, 100))).code).toBe('payload_too_large');
    // Read (and thrown away) up to the drain cap, so that the client's writes complete.
    expect(req.isPaused()).toBe(false);
    req.end('x'.repeat(101));
    await new Promise((resolve) => req.once('end', resolve));
    expect(req.listenerCount('data')).toBe(0);
  });

  it('reads nothing of a declared Content-Length past the drain cap, and pauses the stream', async () => {
    const req = request({ 'content-length': '1001' });
    expect((await refusal(readRawBody(req, 100, 1000))).code).toBe('payload_too_large');
    expect(req.isPaused()).toBe(true);
    expect(req.listenerCount('data')).toBe(0);
  });

  it('refuses a body at the first chunk past the limit, keeps none of the rest, and stops at the cap', async () => {
    const req = request();
    const read = readRawBody(req, 10, 40);
    req.write('x'.repeat(8));
    req.write('x'.repeat(8));
    expect((await refusal(read)).code).toBe('payload_too_large');
    expect(req.isPaused()).toBe(false);
    req.write('x'.repeat(16));
    await new Promise((resolve) => setImmediate(resolve));
    expect(req.isPaused()).toBe(false);
    req.write('x'.repeat(16));
    await new Promise((resolve) => setImmediate(resolve));
    expect(req.isPaused()).toBe(true);
    expect(req.listenerCount('data')).toBe(0);
  });

  it("holds back the socket's destroySoon while the rest drains, and calls it at the end", async () => {
    let destroyed = 0;
    class Socket {
      destroySoon() {
        destroyed++;
      }
    }
    const socket = new Socket();
    const req = Object.assign(request({ 'content-length': '200' }), { socket });
    await refusal(readRawBody(req, 100));
    // Node's HTTP server asks for the close once the 413 is written: held while the body drains.
    socket.destroySoon();
    expect(destroyed).toBe(0);
    expect(Object.hasOwn(socket, 'destroySoon')).toBe(true);
    req.end('x'.repeat(200));
    await new Promise((resolve) => req.once('end', resolve));
    expect(destroyed).toBe(1);
    expect(Object.hasOwn(socket, 'destroySoon')).toBe(false);
  });

  it('refuses with malformed_payload when the stream fails, an aborted request among others', async () => {
    const req = request();
    const read = readRawBody(req, 100);
    req.write('{"a"');
    const error = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    req.destroy(error);
    const refused = await refusal(read);
    expect(refused.code).toBe('malformed_payload');
    expect(refused.cause).toBe(error);
  });

  it('settles once: an error after the end is taken by its listener and changes nothing', async () => {
    const req = request();
    const read = readRawBody(req, 100);
    req.end('{}');
    expect((await read).toString()).toBe('{}');
    // Without a listener this would be an uncaught 'error' event.
    req.emit('error', new Error('late'));
    expect((await read).toString()).toBe('{}');
  });
});

describe('the drain cap', () => {
  it('defaults to 32 MiB, or twice the body limit when that is larger', () => {
    expect(DEFAULT_MAX_DRAIN_BYTES).toBe(32 * 1024 * 1024);
    expect(defaultMaxDrainBytes(1024 * 1024)).toBe(32 * 1024 * 1024);
    expect(defaultMaxDrainBytes(20 * 1024 * 1024)).toBe(40 * 1024 * 1024);
    expect(resolveMaxDrainBytes(undefined, 1024)).toBe(32 * 1024 * 1024);
  });

  it('accepts 0 (no draining) or a size no smaller than the body limit, and names anything else', () => {
    expect(resolveMaxDrainBytes(0, 1024)).toBe(0);
    expect(resolveMaxDrainBytes(1024, 1024)).toBe(1024);
    for (const bad of [-1, 512, Number.NaN, Number.POSITIVE_INFINITY, '1000' as unknown as number]) {
      expect(() => resolveMaxDrainBytes(bad, 1024), String(bad)).toThrow(/Invalid maxDrainBytes/);
    }
  });
});

describe('readRawBody over real HTTP', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  /** A server that reads bodies with readRawBody and answers 413 (Connection: close) or 200. */
  async function serve(maxBytes: number, maxDrainBytes?: number): Promise<string> {
    const server = createServer((req, res) => {
      readRawBody(req, maxBytes, maxDrainBytes).then(
        (body) => res.end(`read ${body.length}`),
        () => {
          res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
          res.end('{"error":{"code":"payload_too_large"}}');
        },
      );
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('lets a client that writes its whole body first read the 413, within the cap', async () => {
    const url = await serve(1024, 4 * 1024 * 1024);
    for (const chunked of [false, true]) {
      for (let n = 0; n < 5; n++) {
        const answer = await writeThenRead({
          url,
          path: '/',
          body: Buffer.alloc(3 * 1024 * 1024, 'x'),
          chunked,
        });
        expect(answer.writeError).toBeUndefined();
        expect(answer.status).toBe(413);
        expect(answer.headers.connection).toBe('close');
      }
    }
  });

  it('closes past the cap without hanging, and the server keeps serving', async () => {
    const url = await serve(1024, 64 * 1024);
    const past = await writeThenRead({
      url,
      path: '/',
      body: Buffer.alloc(8 * 1024 * 1024, 'x'),
      chunked: true,
    });
    if (past.status !== undefined) expect(past.status).toBe(413);
    const declared = await writeThenRead({
      url,
      path: '/',
      body: Buffer.alloc(1024 * 1024, 'x'),
      declaredLength: 8 * 1024 * 1024,
    });
    if (declared.status !== undefined) expect(declared.status).toBe(413);
    const res = await fetch(url, { method: 'POST', body: 'hello' });
    expect(await res.text()).toBe('read 5');
  });
});

describe('runAfterResponse', () => {
  const response = (state: Partial<ServerResponse> = {}) =>
    Object.assign(new EventEmitter(), {
      writableFinished: false,
      destroyed: false,
      ...state,
    }) as unknown as ServerResponse;

  it('starts once the response finished, once only, when close follows finish', () => {
    const res = response();
    let runs = 0;
    runAfterResponse(res, () => runs++);
    expect(runs).toBe(0);
    res.emit('finish');
    res.emit('close');
    expect(runs).toBe(1);
  });

  it('starts when the client went away before the response finished', () => {
    const res = response();
    let runs = 0;
    runAfterResponse(res, () => runs++);
    res.emit('close');
    res.emit('finish');
    expect(runs).toBe(1);
  });

  it('starts on the next turn when the response is over already', async () => {
    let runs = 0;
    runAfterResponse(response({ writableFinished: true }), () => runs++);
    expect(runs).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(runs).toBe(1);
  });
});
