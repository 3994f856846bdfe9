// @module-tag process
// @module-tag build
// @module-tag pglite
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { exitCode, payhookCli, startServe } from './run-cli.js';

const BIZ = 'c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f';
/** The sandbox's environment: no sealing key, so that `serve` keeps one in its data directory. */
const SANDBOX = {
  NO_COLOR: '1',
  LOG_LEVEL: 'info',
  DATABASE_URL: '',
  PAYHOOK_API_KEYS: '',
  PAYHOOK_SECRET_KEY: '',
};

describe('the key that seals the signing secrets', { timeout: 300_000 }, () => {
  it('payhook keys secret-key prints a new key for PAYHOOK_SECRET_KEY, with the id asked', async () => {
    const made = await payhookCli(['keys', 'secret-key']);
    expect(made.code).toBe(0);
    expect(made.stdout).toMatch(/^PAYHOOK_SECRET_KEY=k[0-9a-f]{8}:[A-Za-z0-9_-]{43}\n/);
    const named = await payhookCli(['keys', 'secret-key', '--id', 'k2026', '--json']);
    const { secretKey, id } = JSON.parse(named.stdout);
    expect(id).toBe('k2026');
    expect(Buffer.from(secretKey.slice('k2026:'.length), 'base64url')).toHaveLength(32);
    expect(secretKey).not.toBe(made.stdout.slice('PAYHOOK_SECRET_KEY='.length).split('\n')[0]);
    const bad = await payhookCli(['keys', 'secret-key', '--id', 'a b']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--id: A key id is 1 to 32 letters');
  });

  it('payhook serve on PGlite without PAYHOOK_SECRET_KEY makes a key file of mode 0600, says so, and reads it again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-secret-key-'));
    const dataDir = join(dir, 'data');
    await copyPgliteTemplate(dataDir);
    const file = join(dataDir, 'payhook-secret-key');
    const secretOf = (out: string) => /WEBHOOK_SECRET=(whsec_[A-Za-z0-9+/=]+)/.exec(out)?.[1];
    try {
      const first = await startServe(dataDir, BIZ, [], SANDBOX);
      first.child.kill('SIGTERM');
      expect(await exitCode(first.child)).toBe(0);
      expect(first.out).toContain(`signing secrets are sealed with the key in ${file} (made now, mode 0600)`);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      const key = await readFile(file, 'utf8');
      expect(key).toMatch(/^k[0-9a-f]{8}:[A-Za-z0-9_-]{43}\n$/);
      const secret = secretOf(first.out);
      expect(secret).toMatch(/^whsec_/);

      // A restart reads the same key, and prints the same secret, opened with it.
      const again = await startServe(dataDir, BIZ, [], SANDBOX);
      again.child.kill('SIGTERM');
      expect(await exitCode(again.child)).toBe(0);
      expect(again.out).toContain(`signing secrets are sealed with the key in ${file}:`);
      expect(again.out).not.toContain('made now');
      expect(await readFile(file, 'utf8')).toBe(key);
      expect(secretOf(again.out)).toBe(secret);

      // Another key given now does not open what the file's key sealed: a clear refusal.
      const other = await payhookCli(['keys', 'list', '--data-dir', dataDir], {
        env: { ...SANDBOX, PAYHOOK_SECRET_KEY: `kother:${Buffer.alloc(32, 7).toString('base64url')}` },
      });
      expect(other.code).toBe(2);
      expect(other.stderr).toContain('PAYHOOK_SECRET_KEY_PREVIOUS');
      expect(other.stderr).toContain('(secret_key_unknown)');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('payhook serve on PostgreSQL without PAYHOOK_SECRET_KEY refuses to start, naming the variable', async () => {
    const refused = await payhookCli(
      ['serve', '--port', '0', '--database-url', 'postgres://postgres@127.0.0.1:5432/never-opened'],
      { env: SANDBOX },
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('PAYHOOK_SECRET_KEY is not set');
    expect(refused.stderr).toContain('(secret_key_missing)');
  });
});
