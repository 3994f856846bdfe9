import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { isPayhookError, readRawBody, runAfterResponse } from '../src/index.js';

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

  it('refuses a declared Content-Length over the limit before reading, and pauses the stream', async () => {
    const req = request({ 'content-length': '101' });
    expect((await refusal(readRawBody(req, 100))).code).toBe('payload_too_large');
    expect(req.isPaused()).toBe(true);
  });

  it('refuses a body at the first chunk past the limit, and stops counting', async () => {
    const req = request();
    const read = readRawBody(req, 10);
    req.write('x'.repeat(8));
    req.write('x'.repeat(8));
    expect((await refusal(read)).code).toBe('payload_too_large');
    expect(req.isPaused()).toBe(true);
    expect(req.listenerCount('data')).toBe(0);
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
