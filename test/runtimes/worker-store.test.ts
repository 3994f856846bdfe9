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

/**
 * The store as the contract suite sees it: each operation is sent to the Worker. The calls made in
 * one tick (a burst of concurrent claims) go in one request and run at once in the Worker, so the
 * concurrency the suite asks for happens in workerd, against the object, not in a pile of sockets.
 */
function durableObjectStore(name: string, retentionMs: number): IdempotencyStore {
  type Call = { op: string; args: unknown[]; resolve(value: unknown): void; reject(error: Error): void };
  let batch: Call[] | undefined;
  const flush = async (calls: Call[]) => {
    try {
      const res = await fetch(url, {
        method: 'POST',
        body: JSON.stringify({ name, retentionMs, calls: calls.map(({ op, args }) => ({ op, args })) }),
      });
      const { results } = (await res.json()) as { results: { result?: unknown; error?: string }[] };
      calls.forEach((call, i) => {
        const answer = results[i];
        if (answer?.error !== undefined)
          call.reject(new Error(`${call.op} failed in the Worker: ${answer.error}`));
        else call.resolve(answer?.result);
      });
    } catch (error) {
      for (const call of calls) call.reject(error as Error);
    }
  };
  const call = <T>(op: string, ...args: unknown[]) =>
    new Promise<T>((resolve, reject) => {
      if (batch === undefined) {
        const calls: Call[] = [];
        batch = calls;
        setTimeout(() => {
          batch = undefined;
          void flush(calls);
        }, 0);
      }
      batch.push({ op, args, resolve: resolve as (value: unknown) => void, reject });
    });
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
