// @module-tag process
// @module-tag build
// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../sender/src/index.js';
import { startTestApp, type TestApp } from '../../sender/test/fixtures/app.js';
import { payhookCli } from './run-cli.js';

const BIZ = 'biz_rotate_test';
const ENV = { NO_COLOR: '1', LOG_LEVEL: 'warn', PAYHOOK_API_KEY: '' };

interface Secret {
  secret?: string;
  public_key?: string;
  current: boolean;
  expires_at?: string | null;
}

describe('payhook rotate, against a real sender', { timeout: 120_000 }, () => {
  let app: TestApp;
  let key: string;
  beforeAll(async () => {
    app = await startTestApp('pglite', 'cli-rotate', {
      PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0',
      PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
    });
    key = await createApiKey(app.database.db, { businessId: BIZ, mode: 'test' });
  }, 60_000);
  afterAll(() => app?.close());

  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${app.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(response.status, `${method} ${path}`).toBeLessThan(300);
    return (await response.json()) as T;
  };
  const rotate = (...args: string[]) =>
    payhookCli(['rotate', ...args, '--base-url', app.url], { env: { ...ENV, PAYHOOK_API_KEY: key } });

  it("rotates the business's secret: prints the new one once, the previous one overlaps for --overlap", async () => {
    const before = (await api<{ data: Secret[] }>('GET', '/accounts/signing-secrets')).data;
    const run = await rotate('--overlap', '2h');
    expect(run.code, run.stderr).toBe(0);
    const after = (await api<{ data: Secret[] }>('GET', '/accounts/signing-secrets')).data;
    const current = after.find((s) => s.current)?.secret as string;
    expect(current).toMatch(/^whsec_/);
    expect(before.map((s) => s.secret)).not.toContain(current);
    const previous = after.find((s) => s.secret === before.find((b) => b.current)?.secret);
    expect(previous).toMatchObject({ current: false });
    const overlapMs = Date.parse(previous?.expires_at as string) - Date.now();
    expect(overlapMs).toBeGreaterThan(2 * 3600_000 - 60_000);
    expect(overlapMs).toBeLessThanOrEqual(2 * 3600_000);
    expect(run.stdout).toBe(
      `Rotated the business's signing secret. The new secret, for the receiver's signingSecrets:\n${current}\nAdd it beside the previous one: events are signed with both until ${previous?.expires_at}, then with the new one only.\n`,
    );
    expect(run.stdout.split(current)).toHaveLength(2);

    const json = JSON.parse((await rotate('--overlap', '0', '--json')).stdout);
    expect(json.rotated).toBe('business');
    expect(json.secrets[0]).toMatchObject({ current: true, secret: expect.stringMatching(/^whsec_/) });
  });

  it("rotates a v1a endpoint's key pair by URL (its new whpk_ public key printed); refuses one signed with the business's secret", async () => {
    const ed = await api<{ data: { id: string } }>('POST', '/webhook-endpoints', {
      url: 'http://127.0.0.1:3009/ed',
      signature_scheme: 'v1a',
    });
    const run = await rotate('http://127.0.0.1:3009/ed');
    expect(run.code, run.stderr).toBe(0);
    const keys = (await api<{ data: Secret[] }>('GET', `/webhook-endpoints/${ed.data.id}/signing-secrets`))
      .data;
    const current = keys.find((k) => k.current)?.public_key as string;
    expect(current).toMatch(/^whpk_/);
    expect(keys).toHaveLength(2);
    expect(run.stdout).toMatch(
      new RegExp(
        `^Rotated the secret of http://127\\.0\\.0\\.1:3009/ed \\(Ed25519, v1a\\)\\. Its new public key, for the receiver's signingPublicKeys:\n${current.replace(/[+/]/g, '\\$&')}\nAdd it beside the previous one: events are signed with both until \\S+, then with the new one only\\.\n$`,
      ),
    );

    // An endpoint added through the settings is signed with the business's secret.
    await api('PATCH', '/accounts/settings', {
      require_mfa: false,
      webhook_urls: ['http://127.0.0.1:3010/v1'],
    });
    const shared = await rotate('http://127.0.0.1:3010/v1');
    expect(shared.code).toBe(1);
    expect(shared.stderr).toContain('409 invalid_state');
    expect(shared.stderr).toContain('rotate it with `payhook rotate`');

    const missing = await rotate('http://127.0.0.1:3011/none');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      'No endpoint has the URL or id http://127.0.0.1:3011/none: nothing rotated.',
    );
    for (const overlap of ['8d', 'soon', '-1']) {
      const bad = await rotate(`--overlap=${overlap}`);
      expect(bad.code, overlap).toBe(2);
      expect(bad.stderr).toContain('--overlap must be seconds or a time');
    }
    const wrongKey = await payhookCli(['rotate', '--base-url', app.url, '--api-key', 'sk_test_nope'], {
      env: ENV,
    });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toContain('401 unauthorized');
  });
});
