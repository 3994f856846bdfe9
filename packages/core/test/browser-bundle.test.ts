// @module-tag process
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createContext, runInContext } from 'node:vm';
import { gzipSync } from 'node:zlib';
import {
  computeChecksum,
  generateSigningKeyPair,
  generateSigningSecret,
  signWebhook,
  signWebhookV1a,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// Core bundled as a browser or a Worker bundles it (esbuild, platform "browser"): no `node:`
// import, and the bundle runs in a realm that has only Web APIs (no Buffer, no process, no
// require), verifying checksums and signatures on Web Crypto with the verdicts of the Node path.
// esbuild starts its own service process, hence the tag. The size of the bundle users get (from the
// packed tarballs, not these sources) is test/packaging/web-bundle.test.ts's.

/** The esbuild that tsup uses (not a dependency of its own here). */
interface Esbuild {
  build(options: Record<string, unknown>): Promise<{
    outputFiles: { contents: Uint8Array; text: string }[];
    metafile: {
      outputs: Record<
        string,
        { inputs: Record<string, { bytesInOutput: number }>; imports: { path: string; external?: boolean }[] }
      >;
    };
  }>;
}
const esbuild = createRequire(createRequire(import.meta.url).resolve('tsup'))('esbuild') as Esbuild;

const src = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const CORE = src('core/src/index.ts');

async function bundle(contents: string, format: 'esm' | 'iife') {
  const result = await esbuild.build({
    stdin: { contents, resolveDir: src('core/test'), loader: 'ts' },
    bundle: true,
    platform: 'browser',
    format,
    ...(format === 'iife' ? { globalName: 'bundled' } : {}),
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
    alias: { '@payhook/core': CORE },
  });
  const output = result.outputFiles[0] as { contents: Uint8Array; text: string };
  const [meta] = Object.values(result.metafile.outputs);
  return {
    text: output.text,
    gzip: gzipSync(output.contents).length,
    meta: meta as NonNullable<typeof meta>,
  };
}

const NODE_IMPORT =
  /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["'](?:node:)?(?:crypto|buffer|module|http|stream|os|fs|net|url|util|zlib|events|path)["']/;

// Bundling, and generated cases: seconds each on a busy machine.
describe('core bundled for the browser', { timeout: 60_000 }, () => {
  it('holds no import of a Node built-in and nothing external', async () => {
    const { text, meta, gzip } = await bundle("export * from '@payhook/core';", 'esm');
    expect(text).not.toMatch(NODE_IMPORT);
    expect(text).not.toMatch(/(?:from|import\(|require\()\s*["']node:/);
    expect(meta.imports.filter((i) => i.external)).toEqual([]);
    // Everything core exports, TypeBox's schemas included: a figure, not a bound.
    console.info(`@payhook/core, every export: ${gzip} bytes minified and gzipped`);
  });

  it('verifies in a realm with only Web APIs, with the verdicts of the Node path', async () => {
    const { text } = await bundle(
      `export { createReceiver, verifyChecksumAsync, verifyChecksum, verifyWebhookSignatureAsync, readSignatureHeaders, computeChecksumAsync, signWebhookV1aAsync, generateSigningKeyPairAsync } from '@payhook/core';`,
      'iife',
    );
    // A fresh realm: the language's own globals plus the Web APIs a Worker has. No Buffer, no
    // process, no require, no setImmediate.
    const realm = createContext({
      crypto: globalThis.crypto,
      TextEncoder,
      TextDecoder,
      console,
      setTimeout,
      clearTimeout,
      setInterval,
      clearInterval,
      queueMicrotask,
      URL,
    });
    runInContext(text, realm);
    const core = runInContext('bundled', realm) as Record<string, (...args: unknown[]) => unknown>;
    expect(runInContext('typeof Buffer + typeof process + typeof require', realm)).toBe(
      'undefinedundefinedundefined',
    );

    const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
    const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
    const ok = (await core.verifyChecksumAsync?.({ rawBody: body }, { businessIds: [BIZ] })) as {
      ok: boolean;
    };
    expect(ok).toMatchObject({ ok: true, businessId: BIZ, canonicalization: 'lexical' });
    const bad = (await core.verifyChecksumAsync?.({ rawBody: body }, { businessIds: ['someone-else'] })) as {
      ok: boolean;
      error: { code: string };
    };
    expect(bad.ok).toBe(false);
    expect(bad.error.code).toBe('invalid_checksum');
    // The synchronous one says what to use instead.
    expect(() => core.verifyChecksum?.({ rawBody: body }, { businessIds: [BIZ] })).toThrow(/async variant/);
    const data = { amount: 1, note: 'é' };
    expect(await core.computeChecksumAsync?.('x.y', data, BIZ)).toBe(computeChecksum('x.y', data, BIZ));

    // The receiver pipeline, as a Worker runs it: Standard Webhooks v1 and v1a, checksum, duplicate.
    const secret = generateSigningSecret();
    const pair = generateSigningKeyPair();
    const receiver = core.createReceiver?.({
      businessIds: [BIZ],
      allowAnyIp: true,
      signingSecrets: [secret],
      signingPublicKeys: [pair.publicKey],
      requireSignature: true,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    }) as {
      onAny(handler: (event: { event: string }) => void): void;
      handle(
        request: unknown,
      ): Promise<{ status: number; body: Record<string, unknown>; afterResponse?: () => Promise<void> }>;
      close(): Promise<void>;
      idle(): Promise<void>;
    };
    const handled: string[] = [];
    receiver.onAny((event: { event: string }) => {
      handled.push(event.event);
    });
    const handle = async (headers: Record<string, string>, rawBody: string) => {
      const result = await receiver.handle({
        method: 'POST',
        contentType: 'application/json',
        headers,
        rawBody,
        remoteAddress: '203.0.113.9',
      });
      await result.afterResponse?.();
      return result;
    };
    const v1 = signWebhook({ id: 'evt_1', body, secrets: [secret] });
    expect((await handle(v1, body)).status).toBe(200);
    expect((await handle(v1, body)).body).toMatchObject({ duplicate: true });
    const other = JSON.stringify(createTestEvent('payment.session.failed', BIZ));
    const v1a = signWebhookV1a({ id: 'evt_2', body: other, secretKeys: [pair.secretKey] });
    expect((await handle(v1a, other)).status).toBe(200);
    expect((await handle(v1a, body)).body).toMatchObject({ error: { code: 'invalid_signature' } });
    expect((await handle({}, body)).body).toMatchObject({ error: { code: 'signature_required' } });
    // Signed in the realm (Web Crypto Ed25519), verified by the Node path's independent keys.
    const fresh = (await core.generateSigningKeyPairAsync?.()) as { secretKey: string; publicKey: string };
    const inRealm = (await core.signWebhookV1aAsync?.({
      id: 'evt_3',
      body,
      secretKeys: [fresh.secretKey],
      timestamp: 1_800_000_000,
    })) as Record<string, string>;
    expect(inRealm).toEqual(
      signWebhookV1a({ id: 'evt_3', body, secretKeys: [fresh.secretKey], timestamp: 1_800_000_000 }),
    );
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded', 'payment.session.failed']);
    await receiver.close();
  });

  it('does bytes as Buffer does: UTF-8 lengths, writes and reads, base64 both ways', async () => {
    const { text } = await bundle(
      `export { utf8Length, writeUtf8, utf8Slice, base64Of, bytesOfBase64, allocBytes } from ${JSON.stringify(src('core/src/bytes.ts'))};`,
      'iife',
    );
    const realm = createContext({ TextEncoder, TextDecoder });
    runInContext(text, realm);
    const bytes = runInContext('bundled', realm) as {
      utf8Length(text: string): number;
      writeUtf8(u: Uint8Array, text: string, at: number): number;
      utf8Slice(u: Uint8Array, start: number, end: number): string;
      base64Of(bytes: Uint8Array): string;
      bytesOfBase64(text: string): Uint8Array | undefined;
      allocBytes(n: number): Uint8Array;
    };
    const same = (a: Uint8Array | undefined, b: Uint8Array) => a !== undefined && Buffer.from(a).equals(b);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary' }),
          fc.string({ unit: 'grapheme' }),
          // Any UTF-16 code units, lone surrogates included.
          fc.array(fc.integer({ min: 0, max: 0xffff })).map((units) => String.fromCharCode(...units)),
        ),
        fc.uint8Array(),
        (s, raw) => {
          expect(bytes.utf8Length(s)).toBe(Buffer.byteLength(s));
          const u = bytes.allocBytes(s.length * 3 + 2);
          const n = bytes.writeUtf8(u, s, 1);
          expect(same(u.subarray(1, 1 + n), Buffer.from(s))).toBe(true);
          expect(bytes.utf8Slice(u, 1, 1 + n)).toBe(Buffer.from(s).toString('utf8'));
          const b64 = Buffer.from(raw).toString('base64');
          expect(bytes.base64Of(raw)).toBe(b64);
          expect(same(bytes.bytesOfBase64(b64), Buffer.from(raw))).toBe(true);
          expect(same(bytes.bytesOfBase64(b64.replace(/=+$/, '')), Buffer.from(raw))).toBe(true);
          expect(same(bytes.bytesOfBase64(Buffer.from(raw).toString('base64url')), Buffer.from(raw))).toBe(
            true,
          );
        },
      ),
      { numRuns: 500 },
    );
    for (const bad of ['a', 'ab=c', 'a===', '@@@@', 'abcd=', 'ab\ncd'])
      expect(bytes.bytesOfBase64(bad), bad).toBeUndefined();
    // Lone surrogates are written as U+FFFD, as Buffer writes them.
    for (const s of ['\ud800', 'a\udc00b', '\ud800\ud800', '\udbff\udfff'])
      expect(bytes.utf8Length(s)).toBe(Buffer.byteLength(s));
  });
});

/*
 * Bun and Deno have node:crypto, so core takes the Node path there by default; the Web path must
 * hold there too. The browser bundle runs on each runtime's binary, verifying the same requests
 * both ways (`crypto: 'auto'` and `'web'`), and prints its verdicts for this process to compare.
 */
describe.each([
  ['bun', [src('../node_modules/.bin/bun'), 'run']],
  ['deno', [src('../node_modules/.bin/deno'), 'run', '--quiet', '--no-prompt']],
] as const)('core bundled, on %s', { timeout: 90_000 }, (runtime, command) => {
  it('verifies checksums, v1 and v1a signatures on both paths, with the verdicts of Node', async () => {
    const { text } = await bundle(
      `export { createReceiver, verifyChecksumAsync, verifyWebhookSignatureAsync, readSignatureHeaders, signWebhookV1a } from '@payhook/core';`,
      'esm',
    );
    const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
    const secret = generateSigningSecret();
    const pair = generateSigningKeyPair();
    const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
    const forged = body.replace('"amount":', '"amount":1');
    const v1 = signWebhook({ id: 'evt_1', body, secrets: [secret] });
    const v1a = signWebhookV1a({ id: 'evt_1', body, secretKeys: [pair.secretKey] });
    const cases = [
      { body, headers: v1 },
      { body, headers: v1a },
      { body: forged, headers: v1 },
      { body: forged, headers: v1a },
      { body, headers: { ...v1a, 'webhook-id': 'evt_2' } },
      { body, headers: {} },
    ];
    const script = `
      import * as core from './core.mjs';
      const cases = ${JSON.stringify(cases)};
      const out = [];
      for (const crypto of ['auto', 'web']) {
        const receiver = core.createReceiver({
          businessIds: [${JSON.stringify(BIZ)}], allowAnyIp: true, crypto, recoveryIntervalMs: 0,
          signingSecrets: [${JSON.stringify(secret)}], signingPublicKeys: [${JSON.stringify(pair.publicKey)}],
          requireSignature: true, logger: { debug() {}, info() {}, warn() {}, error() {} },
        });
        for (const c of cases) {
          const checksum = await core.verifyChecksumAsync({ rawBody: c.body }, { businessIds: [${JSON.stringify(BIZ)}], crypto });
          const signature = await core.verifyWebhookSignatureAsync(core.readSignatureHeaders(c.headers), c.body, {
            secrets: [${JSON.stringify(secret)}], publicKeys: [${JSON.stringify(pair.publicKey)}], crypto,
          });
          const answer = await receiver.handle({ method: 'POST', contentType: 'application/json', headers: c.headers, rawBody: c.body, remoteAddress: '127.0.0.1' });
          await answer.afterResponse?.();
          out.push({ crypto, checksum: checksum.ok || checksum.error.code, signature: signature.ok ? signature.scheme : signature.error.code, status: answer.status });
        }
        await receiver.idle();
        await receiver.close();
      }
      console.log(JSON.stringify(out));
    `;
    const dir = await mkdtemp(join(tmpdir(), `payhook-${runtime}-`));
    try {
      await writeFile(join(dir, 'core.mjs'), text);
      await writeFile(join(dir, 'main.mjs'), script);
      const [bin, ...args] = command;
      const { stdout } = await promisify(execFile)(bin, [...args, join(dir, 'main.mjs')], {
        cwd: dir,
        timeout: 60_000,
      });
      const expected = [
        { checksum: true, signature: 'v1', status: 200 },
        { checksum: true, signature: 'v1a', status: 200 },
        { checksum: 'invalid_checksum', signature: 'invalid_signature', status: 401 },
        { checksum: 'invalid_checksum', signature: 'invalid_signature', status: 401 },
        { checksum: true, signature: 'invalid_signature', status: 401 },
        { checksum: true, signature: 'invalid_signature', status: 401 },
      ];
      expect(JSON.parse(stdout.trim().split('\n').at(-1) as string)).toEqual(
        ['auto', 'web'].flatMap((crypto) => expected.map((row) => ({ crypto, ...row }))),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
