// The cost of verifying one webhook on the runtime that runs this file: payhook on its Web path
// (what it does where node:crypto is missing: Workers, browsers; forced here with crypto: 'web'),
// where a body up to 12 KB is hashed in JavaScript and a larger one by Web Crypto; payhook on its
// default path; and the standardwebhooks package's verify, for payloads of about 1 KB, 10 KB and
// 100 KB, in verifies per second of CPU time. Run by bench/verify.ts under Node, Bun and Deno
// (`<runtime> verify-runtime.mjs` in bench/); prints one line of JSON:
// { runtime, version, results: { '<size>': { '<verifier>': ops/s } } }.
import {
  encodeSignedEvent,
  parseSigningSecret,
  readSignatureHeaders,
  signWebhook,
  verifyChecksum,
  verifyChecksumAsync,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import { Webhook } from 'standardwebhooks';

const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
const EVENT = 'payment.session.succeeded';
const SECRET_BYTES = new TextEncoder().encode('bench-secret-for-standard-webhooks');
const SECRET_BASE64 = btoa(String.fromCharCode(...SECRET_BYTES));
const SIGNING_KEY = parseSigningSecret(`whsec_${SECRET_BASE64}`);
const swh = new Webhook(SECRET_BASE64);

/** Which runtime this is, and its version. */
function runtime() {
  if (globalThis.Bun) return { runtime: 'bun', version: globalThis.Bun.version };
  if (globalThis.Deno) return { runtime: 'deno', version: globalThis.Deno.version.deno };
  return { runtime: 'node', version: process.versions.node };
}

/** A realistic payment whose order grows until its JSON is about `bytes` long (as in verify.ts). */
function paymentOfSize(bytes) {
  const payment = createTestPayment({ method: 'card', status: 'settled' });
  const order = payment.metadata.order;
  const template = order.items;
  let i = 0;
  while (JSON.stringify({ event: EVENT, data: payment, checksum: 'x'.repeat(64) }).length < bytes) {
    order.items.push({ ...template[i % template.length], sku: `SKU-${100000 + i}`, quantity: (i % 5) + 1 });
    i++;
  }
  return payment;
}

/**
 * The process's CPU time in ms, every thread of it (Web Crypto's thread pool too): what a verify
 * costs a busy server, and what other processes on a shared machine do not change as they change
 * the wall clock's share. Node, Bun and Deno all have `process.cpuUsage`.
 */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * Operations per second of CPU time of each task (awaited when it returns a promise): the median
 * of `rounds` rounds, the tasks' rounds taken in turn, so that a change in the machine's state
 * falls on every task alike rather than on whichever ran then.
 */
async function opsPerSecondEach(tasks, roundMs = 150, rounds = 9) {
  const round = async (fn, isAsync, ms) => {
    let n = 0;
    const start = cpuMs();
    let now = start;
    while (now - start < ms) {
      for (let k = 0; k < 16; k++) {
        if (isAsync) await fn();
        else fn();
      }
      n += 16;
      now = cpuMs();
    }
    return (n * 1000) / (now - start);
  };
  const entries = Object.entries(tasks).map(([name, fn]) => ({ name, fn, isAsync: fn() instanceof Promise }));
  for (const task of entries) await round(task.fn, task.isAsync, roundMs);
  const measured = Object.fromEntries(entries.map(({ name }) => [name, []]));
  for (let r = 0; r < rounds; r++) {
    for (const task of entries) measured[task.name].push(await round(task.fn, task.isAsync, roundMs));
  }
  return Object.fromEntries(
    Object.entries(measured).map(([name, ops]) => [
      name,
      Math.round(ops.sort((a, b) => a - b)[Math.floor(rounds / 2)]),
    ]),
  );
}

const results = {};
for (const size of [1_000, 10_000, 100_000]) {
  const data = paymentOfSize(size);
  const raw = encodeSignedEvent(EVENT, data, BIZ);
  const body = new TextEncoder().encode(raw);
  const id = 'msg_bench';
  const signed = signWebhook({ id, body: raw, secrets: [SIGNING_KEY] });
  const received = () => readSignatureHeaders(signed);
  const checksumOptions = { businessIds: [BIZ] };
  const keys = { secrets: [SIGNING_KEY] };
  const web = { ...keys, crypto: 'web' };
  const swhHeaders = {
    'webhook-id': id,
    'webhook-timestamp': signed['webhook-timestamp'],
    'webhook-signature': swh.sign(id, new Date(Number(signed['webhook-timestamp']) * 1000), raw),
  };
  // Every verifier must verify before it is timed.
  const checks = [
    (await verifyChecksumAsync({ rawBody: body }, { ...checksumOptions, crypto: 'web' })).ok,
    (await verifyWebhookSignatureAsync(received(), body, web)).ok,
    verifyChecksum({ rawBody: body }, checksumOptions).ok,
    verifyWebhookSignature(received(), body, keys).ok,
    swh.verify(raw, swhHeaders) !== undefined,
  ];
  if (checks.includes(false)) throw new Error(`a verifier refused its own ${size}-byte body: ${checks}`);

  const tasks = {
    'payhook checksum, Web path': () =>
      verifyChecksumAsync({ rawBody: body }, { ...checksumOptions, crypto: 'web' }),
    'payhook signature, Web path': () => verifyWebhookSignatureAsync(received(), body, web),
    'payhook checksum + signature, Web path': async () =>
      (await verifyWebhookSignatureAsync(received(), body, web)).ok &&
      (await verifyChecksumAsync({ rawBody: body }, { ...checksumOptions, crypto: 'web' })).ok,
    'payhook checksum + signature, default path': () =>
      verifyWebhookSignature(received(), body, keys).ok &&
      verifyChecksum({ rawBody: body }, checksumOptions).ok,
    'standardwebhooks verify': () => swh.verify(raw, swhHeaders),
  };
  results[`${Math.round(raw.length / 1000)} KB`] = await opsPerSecondEach(tasks);
}

console.log(JSON.stringify({ ...runtime(), results }));
