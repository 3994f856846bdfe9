// @module-tag process
// @module-tag pglite
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { KNOWN_EVENTS, PaymentSchema } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, loadConfig } from '../src/index.js';
import { openTestDatabase } from './fixtures/storage.js';

const redocly = fileURLToPath(new URL('../node_modules/.bin/redocly', import.meta.url));

// biome-ignore lint/suspicious/noExplicitAny: the document is checked field by field below
type Doc = any;

describe('the OpenAPI document', { timeout: 60_000 }, () => {
  let app: FastifyInstance;
  let database: Database;
  let cleanup: () => Promise<void>;
  let doc: Doc;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase('pglite', 'openapi'));
    app = await buildApp({ database, config: loadConfig({}), logger: false });
    doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  it('passes redocly lint with the recommended rules, without errors or warnings', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      const result = await promisify(execFile)(redocly, [
        'lint',
        file,
        '--extends=recommended',
        '--format=summary',
      ]).then(
        ({ stdout, stderr }) => ({ ok: true, output: stdout + stderr }),
        (error: { stdout?: string; stderr?: string }) => ({
          ok: false,
          output: `${error.stdout}${error.stderr}`,
        }),
      );
      expect(result.ok, result.output).toBe(true);
      expect(result.output).not.toMatch(/^error /m);
      // Nor warnings: every operation documents its refusals (4XX) too.
      expect(result.output).not.toMatch(/^warning /m);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives every operation a summary, a unique operationId and a tag, and says who needs no key', () => {
    const ids: string[] = [];
    for (const [path, item] of Object.entries<Doc>(doc.paths)) {
      for (const [method, operation] of Object.entries<Doc>(item)) {
        expect(operation.summary, `${method} ${path}`).toEqual(expect.any(String));
        expect(operation.tags, `${method} ${path}`).toHaveLength(1);
        ids.push(operation.operationId);
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).not.toContain(undefined);
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/metrics'].get).toMatchObject({ security: [], tags: ['operations'] });
    // Creation and capture share a path prefix: each operation is named for what it does.
    expect(doc.paths['/payment-sessions'].post.operationId).toBe('createPaymentSession');
    expect(doc.paths['/payment-sessions/{payment_id}'].post.operationId).toBe('capturePaymentSession');
    // Bodies are required only where a request needs one: a capture works without.
    expect(doc.paths['/payment-sessions/{payment_id}'].post.requestBody.required).toBe(false);
    expect(doc.paths['/events/{id}/redeliver'].post.requestBody.required).toBe(false);
    expect(doc.paths['/customers'].post.requestBody.required).toBe(true);
    expect(doc.servers).toEqual([expect.objectContaining({ url: expect.stringMatching(/^http/) })]);
    expect(doc.paths['/events/redeliver'].post.description).toContain(
      'Only deliveries whose status is failed',
    );
  });

  it('describes the three events as webhooks, with the schema core parses them with', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...KNOWN_EVENTS].sort());
    for (const name of KNOWN_EVENTS) {
      const post = doc.webhooks[name].post;
      const schema = post.requestBody.content['application/json'].schema;
      expect(schema.properties.event).toMatchObject({ const: name });
      expect(schema.properties.data).toEqual(JSON.parse(JSON.stringify(PaymentSchema)));
      expect(schema.properties.checksum).toMatchObject({ pattern: '^[0-9a-f]{64}$' });
      expect(post.parameters.map((p: { name: string }) => p.name)).toEqual([
        'webhook-id',
        'webhook-timestamp',
        'webhook-signature',
      ]);
    }
  });
});
