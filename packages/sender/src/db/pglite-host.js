// @ts-check
// The thread that runs the sender's embedded PGlite (`./pglite-thread.ts` starts it). Plain
// JavaScript, so that one file runs both from the sources and from the build: a worker thread is
// loaded by Node itself, past any TypeScript loader.
//
// It speaks PostgreSQL's wire protocol and nothing else. Each message from the main thread is a
// batch of frontend messages; the answer is the backend's bytes, unparsed (the main thread parses
// them, as a client of a server would), in a buffer handed over rather than copied.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

/** @param {unknown} error */
function describe(error) {
  return error instanceof Error ? error.message : String(error);
}

/** @type {PGlite} */
let pglite;
try {
  pglite = new PGlite(/** @type {{ dataDir: string }} */ (workerData).dataDir);
  await pglite.waitReady;
  port.postMessage({ type: 'ready' });
} catch (error) {
  port.postMessage({ type: 'failed', message: describe(error) });
  process.exit(1);
}

/**
 * Runs one batch and collects what the backend wrote. PGlite hands each chunk as a view of its
 * WASM memory, reused by the next call: each is copied. `execProtocolRawStream` with a handler of
 * its own does not also parse the answer here (`execProtocolRaw` would, for nothing).
 *
 * @param {Uint8Array} bytes
 */
async function run(bytes) {
  /** @type {Uint8Array[]} */
  const chunks = [];
  let length = 0;
  await pglite.execProtocolRawStream(bytes, {
    syncToFs: false,
    onRawData: (chunk) => {
      chunks.push(chunk.slice());
      length += chunk.length;
    },
  });
  if (chunks.length === 1) return /** @type {Uint8Array} */ (chunks[0]);
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** The frontend message types of PostgreSQL's protocol 3.0 that the main thread sends (no Terminate). */
const FRONTEND = new Set(Array.from('BCcdDEfFHPQS', (c) => c.charCodeAt(0)));

/**
 * Why `bytes` is not a whole sequence of frontend messages (a type, then a length that counts
 * itself), or `undefined`. PGlite answers a message of a type it does not know with a FATAL error
 * that it then repeats without end, holding this thread and filling its memory: such a batch is
 * refused before it reaches PGlite. Only a fault of the main thread's side could send one.
 *
 * @param {unknown} bytes
 */
function malformed(bytes) {
  if (!(bytes instanceof Uint8Array)) return 'not bytes';
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at < bytes.length; ) {
    if (!FRONTEND.has(/** @type {number} */ (bytes[at]))) return `message type ${bytes[at]} at byte ${at}`;
    const length = at + 5 <= bytes.length ? view.getInt32(at + 1) : -1;
    if (length < 4 || at + 1 + length > bytes.length) return `a message cut short at byte ${at}`;
    at += 1 + length;
  }
  return undefined;
}

// One batch at a time, in the order they came: PGlite is one session.
port.on('message', async (/** @type {{ id: number, bytes?: Uint8Array, close?: true }} */ message) => {
  if (message.close) {
    await pglite.close().catch(() => {});
    port.postMessage({ type: 'closed', id: message.id });
    port.close();
    return;
  }
  const problem = malformed(message.bytes);
  if (problem) {
    port.postMessage({
      type: 'error',
      id: message.id,
      message: `a batch that is not frontend messages (${problem})`,
    });
    return;
  }
  try {
    const data = await run(/** @type {Uint8Array} */ (message.bytes));
    port.postMessage({ type: 'result', id: message.id, data }, [data.buffer]);
  } catch (error) {
    // PGlite itself failed (its database errors come back inside the bytes): the session is gone.
    port.postMessage({ type: 'error', id: message.id, message: describe(error) });
  }
});
