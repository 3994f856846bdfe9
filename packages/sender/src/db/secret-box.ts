// The key that seals signing secrets at rest, and the seal itself: AES-256-GCM with a random
// 96-bit nonce per value, bound to the row it belongs to (docs/decisions.md, "Signing secrets
// sealed at rest"). The key is never in the database: it comes from PAYHOOK_SECRET_KEY (and
// PAYHOOK_SECRET_KEY_PREVIOUS during a key rotation), or, for the embedded sandbox, from a file
// beside its data (db/secret-key-file.ts).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Why the sealing key cannot be used; each is a refusal to start, with a message naming the
 * variable to set. Match on `code`, never on the message.
 */
export type SecretKeyErrorCode =
  /** PostgreSQL with no PAYHOOK_SECRET_KEY: nothing to seal new secrets with. */
  | 'secret_key_missing'
  /** PAYHOOK_SECRET_KEY or PAYHOOK_SECRET_KEY_PREVIOUS is not `<key id>:<32 bytes, base64url>`. */
  | 'secret_key_invalid'
  /** A key of the configuration does not open the values sealed under its key id. */
  | 'secret_key_wrong'
  /** Values are sealed under a key id that no configured key has. */
  | 'secret_key_unknown';

/** A sealing key that cannot be used: the sender refuses to start rather than fail to sign. */
export class SecretKeyError extends Error {
  override readonly name = 'SecretKeyError';
  constructor(
    readonly code: SecretKeyErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** One sealing key: its id (written beside every value it seals) and its 32 bytes. */
export interface SecretKey {
  id: string;
  key: Buffer;
}

/** The keys a sender holds: `current` seals, every one of them opens. */
export interface SecretKeys {
  current: SecretKey;
  previous: SecretKey[];
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** The prefix of a sealed value: format 1, then the key id, then nonce, ciphertext and tag. */
const SEALED = /^v1:([A-Za-z0-9_-]{1,32}):([A-Za-z0-9_-]+)$/;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** `<key id>:<32 random bytes, base64url>`; `variable` names where it came from in errors. */
function parseKey(text: string, variable: string): SecretKey {
  const at = text.indexOf(':');
  const id = text.slice(0, at);
  const encoded = text.slice(at + 1);
  const key = BASE64URL.test(encoded) ? Buffer.from(encoded, 'base64url') : Buffer.alloc(0);
  if (at < 0 || !KEY_ID.test(id) || key.length !== 32) {
    throw new SecretKeyError(
      'secret_key_invalid',
      `${variable} must be <key id>:<32 random bytes in base64url>, such as the line \`payhook keys secret-key\` prints; ${JSON.stringify(`${text.slice(0, Math.max(at, 0))}:***`)} is not.`,
    );
  }
  return { id, key };
}

/**
 * The sealing keys of an environment: `PAYHOOK_SECRET_KEY` (the one that seals) and
 * `PAYHOOK_SECRET_KEY_PREVIOUS` (comma-separated keys that still open values sealed before a
 * rotation). Undefined when `PAYHOOK_SECRET_KEY` is unset or empty; a malformed value, or a key id
 * given twice, is a {@link SecretKeyError} `secret_key_invalid` naming the variable.
 *
 * @example
 * ```ts
 * const keys = readSecretKeys(process.env); // PAYHOOK_SECRET_KEY=k1:<base64url>
 * ```
 */
export function readSecretKeys(env: Record<string, string | undefined>): SecretKeys | undefined {
  const raw = env.PAYHOOK_SECRET_KEY?.trim();
  const previousRaw = (env.PAYHOOK_SECRET_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!raw) {
    if (previousRaw.length > 0) {
      throw new SecretKeyError(
        'secret_key_invalid',
        'PAYHOOK_SECRET_KEY_PREVIOUS is set but PAYHOOK_SECRET_KEY is not: set the key that seals new values too.',
      );
    }
    return undefined;
  }
  const current = parseKey(raw, 'PAYHOOK_SECRET_KEY');
  const previous = previousRaw.map((text) => parseKey(text, 'PAYHOOK_SECRET_KEY_PREVIOUS'));
  const ids = [current, ...previous].map((k) => k.id);
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice !== undefined) {
    throw new SecretKeyError(
      'secret_key_invalid',
      `The key id ${JSON.stringify(twice)} is given twice in PAYHOOK_SECRET_KEY and PAYHOOK_SECRET_KEY_PREVIOUS: each key needs its own id.`,
    );
  }
  return { current, previous };
}

/**
 * A new sealing key as PAYHOOK_SECRET_KEY takes it: `<key id>:<32 random bytes, base64url>`, the
 * id `k` and 8 random hex digits unless one is given.
 *
 * @example
 * ```ts
 * generateSecretKey(); // 'k3f9a0c1d:q8V...'
 * ```
 */
export function generateSecretKey(id = `k${randomBytes(4).toString('hex')}`): string {
  if (!KEY_ID.test(id)) {
    throw new SecretKeyError(
      'secret_key_invalid',
      `A key id is 1 to 32 letters, digits, "_" or "-", not ${JSON.stringify(id)}.`,
    );
  }
  return `${id}:${randomBytes(32).toString('base64url')}`;
}

/** Seals and opens values with a sender's keys. */
export interface SecretBox {
  /** The id of the key that seals. */
  readonly currentId: string;
  /** The ids of every key held, the sealing one first. */
  readonly ids: readonly string[];
  /** `v1:<key id>:<nonce, ciphertext and tag, base64url>`, bound to `context` (the row). */
  seal(value: string, context: string): string;
  /**
   * The value sealed by {@link seal} with the same `context`; a value of another row, a key not
   * held or a wrong one is a {@link SecretKeyError}, never a wrong secret.
   */
  open(sealed: string, context: string): string;
}

/** The key id of a sealed value, or undefined for a value stored as it is (before sealing). */
export function sealedKeyId(value: string): string | undefined {
  return SEALED.exec(value)?.[1];
}

/**
 * The box of a set of keys.
 *
 * @example
 * ```ts
 * const box = createSecretBox(readSecretKeys(process.env)!);
 * const stored = box.seal('whsec_...', rowContext);
 * box.open(stored, rowContext); // 'whsec_...'
 * ```
 */
export function createSecretBox(keys: SecretKeys): SecretBox {
  const byId = new Map([keys.current, ...keys.previous].map((k) => [k.id, k.key]));
  return {
    currentId: keys.current.id,
    ids: [...byId.keys()],
    seal(value, context) {
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', keys.current.key, nonce);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
      const sealed = Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url');
      return `v1:${keys.current.id}:${sealed}`;
    },
    open(sealed, context) {
      const match = SEALED.exec(sealed);
      if (!match)
        throw new SecretKeyError('secret_key_unknown', 'A stored secret is not sealed (v1:<key id>:...).');
      const [, id, encoded] = match as unknown as [string, string, string];
      const key = byId.get(id);
      if (!key) {
        throw new SecretKeyError(
          'secret_key_unknown',
          `Signing secrets are sealed under the key id ${JSON.stringify(id)}, which neither PAYHOOK_SECRET_KEY nor PAYHOOK_SECRET_KEY_PREVIOUS holds: add that key to PAYHOOK_SECRET_KEY_PREVIOUS.`,
        );
      }
      const bytes = Buffer.from(encoded, 'base64url');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
        return Buffer.concat([
          decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)),
          decipher.final(),
        ]).toString('utf8');
      } catch {
        throw new SecretKeyError(
          'secret_key_wrong',
          `The key ${JSON.stringify(id)} of ${id === keys.current.id ? 'PAYHOOK_SECRET_KEY' : 'PAYHOOK_SECRET_KEY_PREVIOUS'} does not open the signing secrets sealed under that id: it is not the key they were sealed with (or a value was altered).`,
        );
      }
    },
  };
}
