// @module-tag process
// @module-tag build
// @module-tag pglite
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import { bin, cliEnv, exitCode, payhookCli, startServe } from './run-cli.js';

const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';

/** The status of an API request with `apiKey`. */
const customers = (base: string | undefined, apiKey: string) =>
  fetch(`${base}/customers/`, { headers: { authorization: `Bearer ${apiKey}` } }).then((r) => r.status);

/** The sender's environment, without any a developer's shell may carry. */
const ENV = { NO_COLOR: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', PAYHOOK_API_KEYS: '' };

/**
 * The process `parent` started: under script(1), the terminal's session leader (the sender, which
 * the shell execs), whose process group is the terminal's foreground group.
 */
const childOf = (parent: ChildProcess) =>
  Number(
    execFileSync('pgrep', ['-P', String(parent.pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')[0],
  );

// Each step is a process that opens PGlite (seconds each on a busy two-core machine): a generous
// bound, which a hang still reaches.
describe('payhook keys and payhook serve', { timeout: 300_000 }, () => {
  it('creates API keys (shown once, stored hashed), lists them and revokes one by its prefix', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-keys-'));
    const dataDir = join(dir, 'data');
    const keys = (...args: string[]) => payhookCli(['keys', ...args, '--data-dir', dataDir]);
    // Keys on an existing, empty database: the first start is the next test's.
    await copyPgliteTemplate(dataDir);
    try {
      const created = await keys('create', '--business-id', BIZ, '--mode', 'live', '--json');
      expect(created.code).toBe(0);
      const { key } = JSON.parse(created.stdout);
      expect(key).toMatch(/^sk_live_/);
      const list = await keys('list', '--json');
      expect(JSON.parse(list.stdout)).toEqual([
        { prefix: key.slice(0, 12), businessId: BIZ, mode: 'live', createdAt: expect.any(String) },
      ]);
      expect(list.stdout).not.toContain(key);
      expect((await keys('create', '--business-id', BIZ, '--mode', 'prod')).code).toBe(2);
      expect((await payhookCli(['keys', 'rotate'])).code).toBe(2);

      // A prefix two keys share revokes neither and lists both.
      const other = JSON.parse(
        (await keys('create', '--business-id', 'biz_2', '--mode', 'live', '--json')).stdout,
      );
      const ambiguous = await keys('revoke', 'sk_live_');
      expect(ambiguous.code).toBe(1);
      expect(ambiguous.stderr).toContain('2 keys start with "sk_live_"; none revoked');
      expect(ambiguous.stderr).toContain(other.key.slice(0, 12));

      // Revoked by the prefix the listing shows; a second revoke, by the whole key, finds nothing.
      const revoked = await keys('revoke', key.slice(0, 12));
      expect(revoked).toMatchObject({
        code: 0,
        stdout: `Revoked ${key.slice(0, 12)}… (live, business ${BIZ}).\n`,
      });
      const again = await keys('revoke', key);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('No stored key matches');
      expect((await keys('revoke')).stderr).toContain('<key or prefix> is required');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('serves the sender: progress and a test key on a first start, then the stored keys by prefix; a revoked key is refused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-serve-'));
    const dataDir = join(dir, 'data');
    const children: ReturnType<typeof spawn>[] = [];
    const collect = (child: ReturnType<typeof spawn>) => {
      children.push(child);
      const run = { child, out: '' };
      child.stdout?.on('data', (c) => (run.out += c));
      return run;
    };
    // In a terminal (a pseudo-terminal through util-linux's script(1)), as a user runs it.
    const inTerminal = (...flags: string[]) =>
      collect(
        spawn(
          'script',
          [
            '-qec',
            `exec "${process.execPath}" "${bin}" serve --port 0 --data-dir "${dataDir}" ${flags.join(' ')}`,
            '/dev/null',
          ],
          // script(1) runs the command through $SHELL: dash forks where bash execs, and a forked
          // shell would take the Ctrl-C itself. `exec` makes the sender the terminal's session
          // leader under any shell; /bin/sh is pinned so that every run takes the same path.
          { env: cliEnv({ ...ENV, SHELL: '/bin/sh' }) },
        ),
      );
    // Piped, as a process manager or a log collector runs it.
    const piped = (...flags: string[]) =>
      collect(
        spawn(process.execPath, [bin, 'serve', '--port', '0', '--data-dir', dataDir, ...flags], {
          env: cliEnv(ENV),
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
    try {
      // First start, in a terminal: readable lines only, the key made for --business-id, Ctrl-C stops it.
      const first = inTerminal('--business-id', BIZ);
      await expect.poll(() => first.out, { timeout: 150_000 }).toContain('payhook endpoints add');
      const text = first.out.replace(/\r\n/g, '\n');
      expect(text).toMatch(
        /^Creating the sender's database in .+ \(first start: a few seconds\)\.\.\.\nDatabase ready\.\nCreated a test-mode API key/,
      );
      expect(text).not.toContain('{"level"');
      const key = /API key:\s+(\S+)/.exec(text)?.[1] as string;
      const base = /listening on (http:\/\/\S+)/.exec(text)?.[1];
      expect(key).toMatch(/^sk_test_/);
      expect(text).toContain(`business id: ${BIZ}`);
      expect(text).toContain(`API keys:  ${key.slice(0, 12)}… (test, business ${BIZ})`);
      expect(text).toContain(`payhook keys create --business-id ${BIZ} --mode test --data-dir ${dataDir}`);
      // The end of the start: the receiver's settings to paste, and the command that registers its
      // URL, with the key made now; this sender takes no localhost URL, and says so.
      const secret = /export WEBHOOK_SECRET=(whsec_\S+)\n/.exec(text)?.[1] as string;
      expect(text).toContain(
        [
          "Receivers verify with these (paste them into the receiver's shell):",
          `  export BUSINESS_ID=${BIZ}`,
          `  export WEBHOOK_SECRET=${secret}`,
          '  export ALLOWED_IPS=127.0.0.1,::1',
          "Register the receiver's URL with this sender (in another terminal):",
          '  # refused for localhost until this sender runs with --allow-private-webhooks (local only)',
          `  payhook endpoints add http://localhost:3000/webhooks --base-url ${base} --api-key ${key}\n`,
        ].join('\n'),
      );
      const secrets = await fetch(`${base}/accounts/signing-secrets`, {
        headers: { authorization: `Bearer ${key}` },
      }).then((r) => r.json() as Promise<{ data: { secret: string; current: boolean }[] }>);
      expect(secrets.data).toEqual([expect.objectContaining({ secret, current: true })]);
      expect(await customers(base, key)).toBe(200);
      // Ctrl-C: SIGINT to the terminal's foreground process group, as the terminal sends it.
      process.kill(-childOf(first.child), 'SIGINT');
      expect(await exitCode(first.child), first.out).toBe(0);
      expect(first.out).toContain('Shutting down: finishing the deliveries in flight...');

      // With the sender stopped: another key for the business, and the first one revoked.
      const made = await payhookCli([
        'keys',
        'create',
        '--business-id',
        BIZ,
        '--mode',
        'test',
        '--data-dir',
        dataDir,
        '--json',
      ]);
      const second = JSON.parse(made.stdout).key as string;
      expect((await payhookCli(['keys', 'revoke', key, '--data-dir', dataDir])).code).toBe(0);

      // A later start, piped: JSON lines only, no new key, the stored one by prefix; the revoked key is refused.
      const later = piped();
      await expect.poll(() => later.out, { timeout: 150_000 }).toContain('payhook endpoints add');
      const lines = later.out
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(later.out).not.toContain('Creating');
      expect(later.out).not.toContain('Created');
      expect(later.out).not.toContain(second);
      expect(lines).toContainEqual(
        expect.objectContaining({ level: 30, keyPrefix: second.slice(0, 12), mode: 'test', businessId: BIZ }),
      );
      expect(lines.some((l) => l.keyPrefix === key.slice(0, 12))).toBe(false);
      // The same secret on every start; no full key now, so the command reads PAYHOOK_API_KEY.
      expect(lines.at(-2)).toMatchObject({
        level: 30,
        msg: `Receivers verify with BUSINESS_ID=${BIZ} WEBHOOK_SECRET=${secret} ALLOWED_IPS=127.0.0.1,::1`,
        businessId: BIZ,
        webhookSecret: secret,
        allowedIps: '127.0.0.1,::1',
      });
      expect(lines.at(-1)).toMatchObject({
        level: 30,
        command: expect.stringMatching(
          /^payhook endpoints add http:\/\/localhost:3000\/webhooks --base-url http:\S+$/,
        ),
      });
      const url = lines.find((l) => typeof l.url === 'string')?.url as string;
      expect(await customers(url, key)).toBe(401);
      expect(await customers(url, second)).toBe(200);
      later.child.kill('SIGTERM');
      expect(await exitCode(later.child)).toBe(0);

      const bad = await payhookCli(['serve', '--log-format', 'xml']);
      expect(bad.stderr).toContain('--log-format must be one of pretty, json');
    } finally {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("prints the commands to paste as it was run: `pnpm -s payhook ...` under the clone's pnpm script, `payhook ...` run directly", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-invoked-'));
    const dataDir = join(dir, 'data');
    await copyPgliteTemplate(dataDir);
    /** serve's commands (JSON lines): the one that makes another key, the one that registers the receiver. */
    const commands = (out: string) =>
      out
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).command)
        .filter((command) => command !== undefined);
    const pnpmScript = {
      ...ENV,
      npm_lifecycle_event: 'payhook',
      npm_config_user_agent: 'pnpm/10.28.1 npm/? node/v20.0.0 linux x64',
    };
    const viaPnpm = await startServe(dataDir, BIZ, [], pnpmScript);
    try {
      viaPnpm.child.kill('SIGTERM');
      expect(await exitCode(viaPnpm.child)).toBe(0);
      const [keysCreate, endpointsAdd] = commands(viaPnpm.out);
      expect(keysCreate).toBe(
        `pnpm -s payhook keys create --business-id ${BIZ} --mode test --data-dir ${dataDir}`,
      );
      expect(endpointsAdd).toMatch(
        /^pnpm -s payhook endpoints add http:\/\/localhost:3000\/webhooks --base-url http:\S+ --api-key sk_test_\S+$/,
      );
      // The same sender run directly (the command on the PATH): payhook.
      const direct = await startServe(dataDir, BIZ, [], ENV);
      direct.child.kill('SIGTERM');
      expect(await exitCode(direct.child)).toBe(0);
      const [keysCreateDirect, endpointsAddDirect] = commands(direct.out);
      expect(keysCreateDirect).toBe(
        `payhook keys create --business-id ${BIZ} --mode test --data-dir ${dataDir}`,
      );
      expect(endpointsAddDirect).toMatch(
        /^payhook endpoints add http:\/\/localhost:3000\/webhooks --base-url http:\S+$/,
      );
    } finally {
      if (viaPnpm.child.exitCode === null) viaPnpm.child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('on a port in use, fails in one line naming the port and --port, before making a database or a key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-busy-'));
    const dataDir = join(dir, 'data');
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const { port } = taken.address() as AddressInfo;
    try {
      const run = await payhookCli(['serve', '--port', String(port), '--data-dir', dataDir], { env: ENV });
      expect(run.code).toBe(3);
      expect(run.stderr).toBe(
        `payhook serve: Port ${port} is in use on 127.0.0.1 (by another program, or another payhook serve): choose another with --port.\n`,
      );
      expect(run.stdout).toBe('');
      expect(existsSync(dataDir)).toBe(false);
    } finally {
      taken.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('stops at once, with 143 and a message, on a second signal while a delivery is in flight', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-stop-'));
    // A receiver that takes every request and never answers: the delivery stays in flight.
    let received = 0;
    const receiver = createServer(() => void received++);
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    await copyPgliteTemplate(join(dir, 'data'));
    const sender = await startServe(join(dir, 'data'), BIZ, ['--allow-private-webhooks'], {
      ...ENV,
      LOG_LEVEL: 'info',
    });
    const { child } = sender;
    try {
      const { url: base, apiKey: key } = sender;
      const call = (method: string, path: string, body: unknown) =>
        fetch(`${base}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((r) => r.status);
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`;
      expect(await call('PATCH', '/accounts/settings', { webhook_urls: [url] })).toBe(200);
      expect(await call('POST', '/payment-sessions', sessionRequest)).toBe(201);
      await expect.poll(() => received, { timeout: 30_000 }).toBeGreaterThan(0);

      child.kill('SIGTERM');
      await expect.poll(() => sender.out).toContain('Shutting down');
      child.kill('SIGTERM');
      expect(await exitCode(child), sender.out).toBe(143);
      expect(sender.out).toContain(
        'SIGTERM again: stopping now; deliveries in flight are retried after their lease.',
      );
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      receiver.closeAllConnections();
      receiver.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
  it('stops gracefully on a SIGTERM sent the moment it says it listens, before its start is done', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-early-stop-'));
    const dataDir = join(dir, 'data');
    await copyPgliteTemplate(dataDir);
    const child = spawn(
      process.execPath,
      [bin, 'serve', '--port', '0', '--data-dir', dataDir, '--business-id', BIZ],
      { env: cliEnv(ENV), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let sent = false;
    // As a supervisor that stops what it just started: in the same turn as the line arrives, while
    // serve still reads its keys and prints the receiver's settings.
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk;
      if (!sent && out.includes('payhook sender listening on')) {
        sent = true;
        child.kill('SIGTERM');
      }
    });
    try {
      expect(await exitCode(child), out).toBe(0);
      expect(sent).toBe(true);
      expect(out).toContain('Shutting down');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
