// @module-tag pglite
import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestApp } from './fixtures/app.js';

// A client that keeps its connection alive must not hold a shutdown: the request in flight when
// the close begins is answered, and its connection, idle from then on, is closed.
describe('closing the API with kept-alive connections', { timeout: 60_000 }, () => {
  it('answers the request in flight, then closes its idle connection, and the close ends', async () => {
    const testApp = await startTestApp('pglite', 'shutdown-keepalive', {});
    const { port } = new URL(testApp.url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    const ended = once(socket, 'close');
    // In flight: the headers are in, half the body is not.
    const body = '{"first_name":"Ada"}';
    socket.write(
      `POST /customers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    let closed = false;
    const closing = testApp.close().then(() => {
      closed = true;
    });
    socket.write(body.slice(5));
    // The request is answered (no key: 401) while the service closes ...
    await expect.poll(() => received, { timeout: 10_000 }).toMatch(/^HTTP\/1\.1 401 /);
    // ... then the connection, idle, is closed by the service, and the close completes. Before,
    // the close waited for the client to hang up, for ever.
    await ended;
    await closing;
    expect(closed).toBe(true);
  });
});
