import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSecretBox, generateSecretKey, readSecretKeys, type SecretKeys } from '../src/index.js';

// The seal of signing secrets at rest (db/secret-box.ts), without a database: its format, what
// it is bound to, and the refusals of the keys' variables.

const key = (id: string) => `${id}:${randomBytes(32).toString('base64url')}`;
const keys = (current: string, previous = ''): SecretKeys =>
  readSecretKeys({ PAYHOOK_SECRET_KEY: current, PAYHOOK_SECRET_KEY_PREVIOUS: previous }) as SecretKeys;
const ROW = JSON.stringify(['signing_secrets', '3f1e6a7c-0d3b-4f55-9a0e-1c2b3d4e5f60', 'biz', 'test']);
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

describe('the secret box', () => {
  it('seals each value with its own nonce, as v1:<key id>:..., and opens it with the same row', () => {
    const box = createSecretBox(keys(key('k1')));
    const [a, b] = [box.seal(SECRET, ROW), box.seal(SECRET, ROW)];
    expect(a).toMatch(/^v1:k1:[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    // 12 bytes of nonce, the ciphertext as long as the value, a 16-byte tag.
    expect(Buffer.from(a.slice('v1:k1:'.length), 'base64url')).toHaveLength(12 + SECRET.length + 16);
    expect(box.open(a, ROW)).toBe(SECRET);
    expect(box.open(b, ROW)).toBe(SECRET);
  });

  it('refuses a value of another row, an altered one, one under a wrong key or a key not held', () => {
    const k1 = key('k1');
    const box = createSecretBox(keys(k1));
    const sealed = box.seal(SECRET, ROW);
    const otherRow = ROW.replace('biz', 'biz-2');
    expect(() => box.open(sealed, otherRow)).toThrow(expect.objectContaining({ code: 'secret_key_wrong' }));
    const flipped = `${sealed.slice(0, -2)}${sealed.endsWith('AA') ? 'AB' : 'AA'}`;
    expect(() => box.open(flipped, ROW)).toThrow(expect.objectContaining({ code: 'secret_key_wrong' }));
    expect(() => createSecretBox(keys(key('k1'))).open(sealed, ROW)).toThrow(
      expect.objectContaining({
        code: 'secret_key_wrong',
        message: expect.stringContaining('PAYHOOK_SECRET_KEY'),
      }),
    );
    expect(() => createSecretBox(keys(key('k2'))).open(sealed, ROW)).toThrow(
      expect.objectContaining({ code: 'secret_key_unknown', message: expect.stringContaining('"k1"') }),
    );
    // A previous key still opens; the current one seals.
    const rotated = createSecretBox(keys(key('k2'), k1));
    expect(rotated.open(sealed, ROW)).toBe(SECRET);
    expect(rotated.seal(SECRET, ROW)).toMatch(/^v1:k2:/);
    expect(rotated.ids).toEqual(['k2', 'k1']);
  });

  it('reads the variables, and refuses a malformed key, a reused id or previous keys alone', () => {
    expect(readSecretKeys({})).toBeUndefined();
    expect(readSecretKeys({ PAYHOOK_SECRET_KEY: '' })).toBeUndefined();
    const made = generateSecretKey();
    expect(made).toMatch(/^k[0-9a-f]{8}:[A-Za-z0-9_-]{43}$/);
    expect(readSecretKeys({ PAYHOOK_SECRET_KEY: made })?.current.key).toHaveLength(32);
    const invalid = (env: Record<string, string>, message: string) =>
      expect(() => readSecretKeys(env)).toThrow(
        expect.objectContaining({ code: 'secret_key_invalid', message: expect.stringContaining(message) }),
      );
    invalid({ PAYHOOK_SECRET_KEY: 'k1:short' }, 'PAYHOOK_SECRET_KEY must be <key id>:<32 random bytes');
    invalid({ PAYHOOK_SECRET_KEY: randomBytes(32).toString('base64url') }, 'PAYHOOK_SECRET_KEY must be');
    invalid(
      { PAYHOOK_SECRET_KEY: made, PAYHOOK_SECRET_KEY_PREVIOUS: 'k0:nope' },
      'PAYHOOK_SECRET_KEY_PREVIOUS must be',
    );
    invalid(
      { PAYHOOK_SECRET_KEY: key('k1'), PAYHOOK_SECRET_KEY_PREVIOUS: key('k1') },
      'The key id "k1" is given twice',
    );
    invalid(
      { PAYHOOK_SECRET_KEY_PREVIOUS: key('k1') },
      'PAYHOOK_SECRET_KEY_PREVIOUS is set but PAYHOOK_SECRET_KEY is not',
    );
    // The refusal never repeats the key's bytes.
    const secretPart = randomBytes(31).toString('base64url');
    expect(() => readSecretKeys({ PAYHOOK_SECRET_KEY: `k1:${secretPart}` })).toThrow(
      expect.not.objectContaining({ message: expect.stringContaining(secretPart) }),
    );
    expect(() => generateSecretKey('a b')).toThrow(expect.objectContaining({ code: 'secret_key_invalid' }));
  });
});
