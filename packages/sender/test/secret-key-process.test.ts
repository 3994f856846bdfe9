// @module-tag process
// @module-tag build
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/** `dist/main.js` with `env` over the test's: its exit code and standard error. */
async function refusal(env: Record<string, string>): Promise<{ code: number | null; err: string }> {
  const child = spawn(process.execPath, [main], { env: { ...process.env, PORT: '0', ...env } });
  let err = '';
  child.stderr?.on('data', (chunk) => (err += chunk));
  const [code] = await once(child, 'exit');
  return { code, err };
}

// The sender process refuses to start without a usable sealing key, before it listens: exit 2,
// one line naming the variable and the stable code, no stack trace.
describe('the sender process and PAYHOOK_SECRET_KEY', { timeout: 60_000 }, () => {
  it('exits 2 naming the variable when PostgreSQL has no key, or the key is malformed', async () => {
    // Refused before any connection: the server named is never reached.
    const missing = await refusal({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
      PAYHOOK_SECRET_KEY: '',
    });
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(
      /^payhook sender: PAYHOOK_SECRET_KEY is not set: .* \(secret_key_missing\)\n$/,
    );
    const malformed = await refusal({ PAYHOOK_SECRET_KEY: 'k1:not-32-bytes' });
    expect(malformed.code).toBe(2);
    expect(malformed.err).toContain('PAYHOOK_SECRET_KEY must be <key id>:<32 random bytes in base64url>');
    expect(malformed.err).toContain('(secret_key_invalid)');
    expect(malformed.err).not.toContain('not-32-bytes');
    expect(malformed.err).not.toMatch(/\n\s+at /);
  });
});
