// The Node built-ins core uses, where the runtime has them: reached through
// `process.getBuiltinModule` (Node 20.16+, Bun, Deno, workerd with nodejs_compat) rather than an
// import, so that a bundle for a browser or a Worker holds no `node:` import and loads; there,
// these are undefined and core takes its Web path (Web Crypto, Uint8Array, TextEncoder).
// docs/decisions.md, "Verification without Node built-ins".
import type * as NodeCryptoModule from 'node:crypto';
import type { webcrypto } from 'node:crypto';

/** The `node:crypto` module's type. */
export type NodeCrypto = typeof NodeCryptoModule;
/** Web Crypto's key type (the global `CryptoKey`, named through Node's types). */
export type WebCryptoKey = webcrypto.CryptoKey;

type Loader = { getBuiltinModule?: (id: string) => unknown } | undefined;

/** A Node built-in module (`crypto`, `module`...) where the runtime has it, else undefined. */
export function builtin<T>(id: string): T | undefined {
  const loader = (globalThis as { process?: Loader }).process;
  try {
    return typeof loader?.getBuiltinModule === 'function' ? (loader.getBuiltinModule(id) as T) : undefined;
  } catch {
    return undefined;
  }
}

const loadedCrypto = builtin<NodeCrypto>('crypto');
const loadedBuffer = builtin<{ Buffer: typeof Buffer }>('buffer')?.Buffer;

/**
 * `node:crypto` where it is complete enough for the synchronous path (and `Buffer` with it),
 * else undefined. A runtime without the one-shot `hash` (Node before 20.12, some emulations) gets
 * it made from `createHash`.
 */
export const nodeCrypto: NodeCrypto | undefined =
  loadedCrypto !== undefined &&
  loadedBuffer !== undefined &&
  typeof loadedCrypto.createHash === 'function' &&
  typeof loadedCrypto.timingSafeEqual === 'function'
    ? typeof loadedCrypto.hash === 'function'
      ? loadedCrypto
      : ({
          ...loadedCrypto,
          hash: ((algorithm: string, data: string | Uint8Array, encoding = 'hex') =>
            loadedCrypto
              .createHash(algorithm)
              .update(data)
              .digest(encoding as 'hex')) as NodeCrypto['hash'],
        } as NodeCrypto)
    : undefined;

/** Node's `Buffer` where it exists (always with {@link nodeCrypto}), else undefined. */
export const NodeBuffer: typeof Buffer | undefined = loadedBuffer;

/**
 * Which implementation verifies: `node` (node:crypto, synchronous) or `web` (the Web path: HMAC in
 * JavaScript for messages up to 12 KB, Web Crypto above and for Ed25519, asynchronous). `auto` is
 * `node` where node:crypto is there, `web` elsewhere.
 */
export type CryptoPath = 'auto' | 'node' | 'web';

/** The path `auto` stands for on this runtime. */
export const defaultCryptoPath: Exclude<CryptoPath, 'auto'> = nodeCrypto !== undefined ? 'node' : 'web';

/** `path` resolved for this runtime; throws a TypeError for `node` where node:crypto is missing. */
export function resolveCryptoPath(path: CryptoPath | undefined, option = 'crypto'): 'node' | 'web' {
  if (path === undefined || path === 'auto') return defaultCryptoPath;
  if (path === 'web') {
    if (globalThis.crypto?.subtle === undefined) {
      throw new TypeError(
        `${option} "web" needs Web Crypto (globalThis.crypto.subtle), which is missing here.`,
      );
    }
    return 'web';
  }
  if (path === 'node') {
    if (nodeCrypto === undefined) {
      throw new TypeError(`${option} "node" needs node:crypto, which this runtime does not have.`);
    }
    return 'node';
  }
  throw new TypeError(`Invalid ${option}: ${String(path)} (expected "auto", "node" or "web").`);
}

/** node:crypto, or a TypeError that says what to use instead. */
export function requireNodeCrypto(what: string): NodeCrypto {
  if (nodeCrypto !== undefined) return nodeCrypto;
  throw new TypeError(
    `${what} is synchronous and needs node:crypto, which this runtime does not have; use its async variant (Web Crypto).`,
  );
}

/** Web Crypto's `subtle`, or a TypeError. */
export function requireSubtle(): webcrypto.SubtleCrypto {
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined) throw new TypeError('Web Crypto (globalThis.crypto.subtle) is missing here.');
  return subtle;
}
