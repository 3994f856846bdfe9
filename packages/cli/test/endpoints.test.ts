// @module-tag process
// @module-tag build
// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { createApiKey } from '../../sender/src/index.js';
import { startTestApp, type TestApp } from '../../sender/test/fixtures/app.js';
import { payhookCli, startServe, startTriggerReceiver, stopServe } from './run-cli.js';

const BIZ = 'biz_endpoints_test';
const ENV = { NO_COLOR: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', PAYHOOK_API_KEYS: '', PAYHOOK_API_KEY: '' };

// Real processes (a sender on PGlite, the command): a generous bound, which a hang still reaches.
describe('payhook endpoints, and the settings payhook serve prints', { timeout: 300_000 }, () => {
  let dir: string;
  let sender: Awaited<ReturnType<typeof startServe>>;
  /** payhook serve's last two JSON lines: the receiver's settings and the command that registers it. */
  let settings: { businessId: string; webhookSecret: string; allowedIps: string };
  let command: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-endpoints-'));
    await copyPgliteTemplate(join(dir, 'data'));
    sender = await startServe(join(dir, 'data'), BIZ, ['--allow-private-webhooks'], ENV);
    const lines = sender.out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    settings = lines.at(-2);
    command = lines.at(-1).command;
  }, 180_000);

  afterAll(async () => {
    if (sender) await stopServe(sender);
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  const settingsOf = (key: string) =>
    fetch(`${sender.url}/accounts/settings`, { headers: { authorization: `Bearer ${key}` } }).then(
      (r) => r.json() as Promise<{ data: { require_mfa: boolean; webhook_urls: string[] } }>,
    );

  it('a receiver configured with what serve prints verifies a real event, once its URL is added with the printed command', async () => {
    expect(settings).toMatchObject({
      businessId: BIZ,
      webhookSecret: expect.stringMatching(/^whsec_/),
      allowedIps: '127.0.0.1,::1',
    });
    // The receiver reads the three variables as the quickstart does, and requires the signature.
    const receiver = await startTriggerReceiver({
      businessIds: [settings.businessId],
      signingSecrets: [settings.webhookSecret],
      requireSignature: true,
      allowedIps: settings.allowedIps.split(','),
    });
    try {
      expect(command).toBe(
        `payhook endpoints add http://localhost:3000/webhooks --base-url ${sender.url} --api-key ${sender.apiKey}`,
      );
      // The printed command, with this receiver's URL for the quickstart's.
      const args = command.replace('http://localhost:3000/webhooks', receiver.url).split(' ').slice(1);
      const added = await payhookCli(args, { env: ENV });
      expect(added.code, added.stderr).toBe(0);
      expect(added.stdout).toMatch(
        new RegExp(
          `^Added ${receiver.url}\\.\nThe sender delivers to this endpoint:\n  ID +STATUS +SCHEME +EVENTS +URL\n  [0-9a-f-]{36}  enabled  v1 {6}\\*  +${receiver.url}\n$`,
        ),
      );

      const made = await payhookCli(
        ['trigger', 'payment.session.succeeded', '--base-url', sender.url, '--api-key', sender.apiKey],
        { env: ENV },
      );
      expect(made.code, made.stderr).toBe(0);
      await expect
        .poll(() => [...receiver.handled].sort(), { timeout: 60_000 })
        .toEqual(['payment.session.created', 'payment.session.succeeded']);
    } finally {
      receiver.close();
      await payhookCli(['endpoints', 'remove', receiver.url, '--base-url', sender.url], {
        env: { ...ENV, PAYHOOK_API_KEY: sender.apiKey },
      });
    }
  });

  it('adds (with a filter, a description, a scheme), lists, disables, enables and removes endpoints, keeping require_mfa; readable and --json; exit 1 for one that does not exist', async () => {
    const key = sender.apiKey;
    const endpoints = (...args: string[]) =>
      payhookCli(['endpoints', ...args, '--base-url', sender.url], { env: { ...ENV, PAYHOOK_API_KEY: key } });
    // require_mfa set elsewhere is left as it is.
    const mfa = await fetch(`${sender.url}/accounts/settings`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ require_mfa: true, webhook_urls: [] }),
    });
    expect(mfa.status).toBe(200);

    const none = await endpoints('list');
    expect(none).toMatchObject({
      code: 0,
      stdout: 'No webhook endpoint. Add one: payhook endpoints add http://localhost:3000/webhooks\n',
    });
    // Without a scheme: http://, as the URL it registered shows.
    const first = await endpoints('add', 'localhost:3001/webhooks');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('Added http://localhost:3001/webhooks.');
    const second = JSON.parse(
      (
        await endpoints(
          'add',
          'http://127.0.0.1:3002/hooks',
          '--events',
          'payment.session.succeeded,payment.session.failed',
          '--description',
          'orders',
          '--json',
        )
      ).stdout,
    );
    expect(second).toMatchObject({
      url: 'http://127.0.0.1:3002/hooks',
      changed: true,
      endpoint: {
        url: 'http://127.0.0.1:3002/hooks',
        enabled_events: ['payment.session.succeeded', 'payment.session.failed'],
        description: 'orders',
        status: 'enabled',
      },
      webhook_urls: ['http://localhost:3001/webhooks', 'http://127.0.0.1:3002/hooks'],
    });
    const third = await endpoints('add', 'http://127.0.0.1:3003/ed', '--scheme', 'v1a');
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toMatch(
      /Its receiver verifies with this public key \(signingPublicKeys\): whpk_\S+\n/,
    );
    const again = await endpoints('add', 'http://localhost:3001/webhooks');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(
      'http://localhost:3001/webhooks has an endpoint already: nothing changed.',
    );
    const listedJson = JSON.parse((await endpoints('list', '--json')).stdout);
    expect(listedJson.webhook_urls).toEqual([
      'http://localhost:3001/webhooks',
      'http://127.0.0.1:3002/hooks',
      'http://127.0.0.1:3003/ed',
    ]);
    expect(listedJson.endpoints.map((e: { signature_scheme: string }) => e.signature_scheme)).toEqual([
      'v1',
      'v1',
      'v1a',
    ]);
    const table = (await endpoints('list')).stdout.split('\n');
    expect(table[0]).toBe('The sender delivers to these 3 endpoints:');
    expect(table[1]).toMatch(/^ {2}ID +STATUS +SCHEME +EVENTS +URL +DESCRIPTION$/);
    // A column as wide as its widest cell; the description last, nothing after an empty one.
    expect(table[2]).toMatch(
      /^ {2}[0-9a-f-]{36} {2}enabled {2}v1 {6}\* {49}http:\/\/localhost:3001\/webhooks$/,
    );
    expect(table[3]).toMatch(
      /^ {2}[0-9a-f-]{36} {2}enabled {2}v1 {6}payment\.session\.succeeded,payment\.session\.failed {2}http:\/\/127\.0\.0\.1:3002\/hooks {5}orders$/,
    );
    expect(table[4]).toMatch(
      /^ {2}[0-9a-f-]{36} {2}enabled {2}v1a {5}\* {49}http:\/\/127\.0\.0\.1:3003\/ed$/,
    );
    expect((await settingsOf(key)).data.require_mfa).toBe(true);

    // Disable and enable by URL or by id.
    const id = listedJson.endpoints[1].id as string;
    const disabled = await endpoints('disable', 'http://127.0.0.1:3002/hooks');
    expect(disabled).toMatchObject({ code: 0 });
    expect(disabled.stdout).toBe(
      'Disabled http://127.0.0.1:3002/hooks: nothing is sent to it until it is enabled; its pending deliveries are kept.\n',
    );
    expect((await endpoints('list')).stdout).toContain(`${id}  disabled (manual)`);
    expect((await endpoints('disable', id)).stdout).toBe(
      'http://127.0.0.1:3002/hooks is disabled already: nothing changed.\n',
    );
    const enabled = JSON.parse((await endpoints('enable', id, '--json')).stdout);
    expect(enabled).toMatchObject({
      changed: true,
      endpoint: { id, status: 'enabled', disabled_reason: null },
    });

    const removed = await endpoints('remove', 'http://localhost:3001/webhooks');
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toMatch(
      /^Removed http:\/\/localhost:3001\/webhooks \([0-9a-f-]{36}\)\.\nThe sender delivers to these 2 endpoints:\n/,
    );
    for (const action of ['remove', 'disable', 'enable']) {
      const missing = await endpoints(action, 'http://localhost:3001/webhooks');
      expect(missing.code, action).toBe(1);
      expect(missing.stderr).toMatch(
        /^No endpoint has the URL or id http:\/\/localhost:3001\/webhooks: nothing changed\.\n/,
      );
    }
    for (const url of ['http://127.0.0.1:3002/hooks', 'http://127.0.0.1:3003/ed']) {
      expect((await endpoints('remove', url, '--json')).code).toBe(0);
    }
    expect(await settingsOf(key)).toEqual({ data: { require_mfa: true, webhook_urls: [] } });
  });

  it('recovers a window: an event made while the endpoint was disabled reaches it once enabled', async () => {
    const key = sender.apiKey;
    const endpoints = (...args: string[]) =>
      payhookCli(['endpoints', ...args, '--base-url', sender.url], { env: { ...ENV, PAYHOOK_API_KEY: key } });
    const receiver = await startTriggerReceiver({ businessIds: [BIZ] });
    try {
      expect((await endpoints('add', receiver.url)).code).toBe(0);
      expect((await endpoints('disable', receiver.url)).code).toBe(0);
      const made = await payhookCli(
        ['trigger', 'payment.session.created', '--base-url', sender.url, '--api-key', key],
        { env: ENV },
      );
      expect(made.code, made.stderr).toBe(0);
      const recovered = await endpoints('recover', receiver.url, '--since', '1h');
      expect(recovered.code, recovered.stderr).toBe(0);
      expect(recovered.stdout).toMatch(
        new RegExp(
          `^Queued 1 delivery to ${receiver.url}, each with a fresh 48 hours: .* The endpoint is disabled: they go out once it is enabled\\.\n$`,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(receiver.handled).toEqual([]);
      const enabled = await endpoints('enable', receiver.url);
      expect(enabled.code, enabled.stderr).toBe(0);
      expect(enabled.stdout).toBe(
        `Enabled ${receiver.url}: the deliveries held while it was disabled resume, each with a fresh 48 hours. The events made while it was disabled are not sent to it unless recovered: payhook endpoints recover ${receiver.url} --since <when> (<when>: when it was disabled, an ISO 8601 time or 30m, 12h, 3d ago; at most 14 days back).\n`,
      );
      await expect.poll(() => receiver.handled, { timeout: 30_000 }).toEqual(['payment.session.created']);
      // Delivered: nothing left to recover.
      const json = JSON.parse((await endpoints('recover', receiver.url, '--since', '1h', '--json')).stdout);
      expect(json).toMatchObject({ url: receiver.url, queued: 0 });
      // Windows the sender refuses: exit 1 with its reason; one the command cannot read: 2.
      const old = await endpoints('recover', receiver.url, '--since', '30d');
      expect(old.code).toBe(1);
      expect(old.stderr).toContain('422 validation_failed');
      expect(old.stderr).toContain('since: must be at most 14 days ago');
      const unread = await endpoints('recover', receiver.url, '--since', 'yesterday');
      expect(unread.code).toBe(2);
      expect(unread.stderr).toContain('--since must be an ISO 8601 time');
      expect((await endpoints('recover', receiver.url)).code).toBe(2);
    } finally {
      receiver.close();
      await endpoints('remove', receiver.url);
    }
  });

  it('a key the sender refuses exits 1 from endpoints, trigger and listen alike; no sender, 3', async () => {
    const wrong = 'sk_test_not_a_key_of_this_sender';
    const runs = {
      endpoints: await payhookCli(['endpoints', 'list', '--base-url', sender.url, '--api-key', wrong], {
        env: ENV,
      }),
      trigger: await payhookCli(
        ['trigger', 'payment.session.created', '--base-url', sender.url, '--api-key', wrong],
        { env: ENV },
      ),
      listen: await payhookCli(['listen', '--base-url', sender.url, '--api-key', wrong], { env: ENV }),
    };
    for (const [name, run] of Object.entries(runs)) {
      expect(run.code, `${name}: ${run.stderr}`).toBe(1);
      expect(run.stderr, name).toContain('401 unauthorized');
      expect(run.stderr, name).toContain('Check --api-key (or PAYHOOK_API_KEY)');
    }
    const away = await payhookCli(
      ['endpoints', 'list', '--base-url', 'http://127.0.0.1:9', '--api-key', wrong],
      {
        env: ENV,
      },
    );
    expect(away.code).toBe(3);
    expect(away.stderr).toContain('Could not reach the sender at http://127.0.0.1:9');
    const noKey = await payhookCli(['endpoints', 'list', '--base-url', sender.url], { env: ENV });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('--api-key (or PAYHOOK_API_KEY) is required');
  });
});

describe('payhook endpoints on a sender that delivers to public addresses only', { timeout: 120_000 }, () => {
  let app: TestApp;
  let key: string;
  beforeAll(async () => {
    app = await startTestApp('pglite', 'cli-endpoints', { PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0' });
    key = await createApiKey(app.database.db, { businessId: BIZ, mode: 'test' });
  }, 60_000);
  afterAll(() => app?.close());

  it("refuses a localhost URL with the sender's reason and its development switch; exit 1, nothing registered", async () => {
    const run = await payhookCli(
      ['endpoints', 'add', 'http://localhost:3000/webhooks', '--base-url', app.url, '--api-key', key],
      { env: ENV },
    );
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^payhook endpoints: the sender refused http:\/\/localhost:3000\/webhooks: localhost is or resolves to a non-public address \([^)]*127\.0\.0\.1: loopback[^)]*\); webhook URLs must be publicly reachable\. .*`payhook serve --allow-private-webhooks`.*\n$/,
    );
    const listed = await payhookCli(
      ['endpoints', 'list', '--json', '--base-url', app.url, '--api-key', key],
      {
        env: ENV,
      },
    );
    expect(JSON.parse(listed.stdout)).toEqual({ endpoints: [], webhook_urls: [] });
  });
});
