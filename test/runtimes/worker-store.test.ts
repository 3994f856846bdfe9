// @module-tag process
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { IdempotencyStore } from '@payhook/core';
import { describeStoreContract } from '@payhook/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// The idempotency store contract, run against examples/web-worker's Durable Object store in
// workerd (Miniflare): each operation goes over HTTP to a Worker that makes it with the example's
// durableObjectStore, over RPC to the PayhookStore object. Each test gets an object of its own.
const example = fileURLToPath(new URL('../../examples/web-worker', import.meta.url));
// Resolves, or fails the file naming the package: a missing runtime is never a pass.
createRequire(`${example}/package.json`).resolve('miniflare');

interface Served {
  ready: Promise<URL>;
  dispose(): Promise<void>;
}
const dev = (await import(`${example}/dev.mjs`)) as {
  bundleWorker(entry: string): Promise<string>;
  serveWorker(script: string, options?: { port?: number }): Served;
};

let served: Served | undefined;
let url = '';
beforeAll(async () => {
  const script = await dev.bundleWorker(fileURLToPath(new URL('./store-rpc-worker.mjs', import.meta.url)));
  served = dev.serveWorker(script);
  url = (await served.ready).href;
}, 60_000);
afterAll(async () => {
  await served?.dispose();
});

function durableObjectStore(name: string, retentionMs: number): IdempotencyStore {
  const call = async <T>(op: string, ...args: unknown[]): Promise<T> => {
    const res = await fetch(url, { method: 'POST', body: JSON.stringify({ name, retentionMs, op, args }) });
    const answer = (await res.json()) as { result?: T; error?: string };
    if (!res.ok) throw new Error(`${op} failed in the Worker: ${answer.error}`);
    return answer.result as T;
  };
  return {
    claim: (key, request) => call('claim', key, request),
    renew: (key, owner, leaseMs) => call('renew', key, owner, leaseMs),
    complete: (key, owner) => call('complete', key, owner),
    fail: (key, owner, error) => call('fail', key, owner, error),
    recover: (owner, leaseMs, limit) => call('recover', owner, leaseMs, limit),
    get: (key) => call('get', key),
  };
}

describeStoreContract(
  'Durable Object (examples/web-worker, in workerd)',
  async ({ retentionMs }) => durableObjectStore(randomUUID(), retentionMs),
  { describe, it, expect, afterEach },
);
