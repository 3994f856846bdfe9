// @module-tag process
// @module-tag build
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../test/support/free-port.js';
import { bin, cliEnv, payhookCli, startTriggerReceiver } from './run-cli.js';

const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';

describe('payhook, the command', { timeout: 60_000 }, () => {
  it('lists its commands and exit codes with --help, and each command has help with examples', async () => {
    const top = await payhookCli(['--help']);
    expect(top.code).toBe(0);
    for (const name of [
      'demo',
      'init',
      'serve',
      'endpoints',
      'rotate',
      'trigger',
      'listen',
      'sign',
      'verify',
      'keys',
    ]) {
      expect(top.stdout).toContain(`  ${name} `);
      const help = await payhookCli([name, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: payhook ${name}`));
      expect(help.stdout).toMatch(/Examples?:/);
      if (name === 'trigger') {
        expect(help.stdout).toContain(
          'Events: payment.session.created, payment.session.succeeded, payment.session.failed',
        );
      }
    }
    expect(top.stdout).toContain('Exit codes');
  });

  it('answers bad usage with a clear message and exit code 2', async () => {
    const unknown = await payhookCli(['fly']);
    expect(unknown).toMatchObject({ code: 2 });
    expect(unknown.stderr).toContain('unknown command "fly"');
    expect(unknown.stderr).not.toContain('Did you mean');
    expect((await payhookCli(['serv'])).stderr).toContain('unknown command "serv". Did you mean serve?');
    const endpoints = await payhookCli(['endpoints', 'ad', 'http://localhost:3000/webhooks']);
    expect(endpoints.code).toBe(2);
    expect(endpoints.stderr).toContain(
      'Unknown action "ad": use add, list, remove, disable, enable or recover.',
    );
    const noUrl = await payhookCli(['endpoints', 'add', 'ftp://host/x', '--api-key', 'sk_test_x']);
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain('<url> must be an http(s) URL, not "ftp://host/x".');
    const action = await payhookCli(['keys', 'revok', 'sk_test_AbCd']);
    expect(action.code).toBe(2);
    expect(action.stderr).toContain('not "revok". Did you mean revoke?');
    const flag = await payhookCli(['sign', '--business', 'x']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--business'");
    expect(flag.stderr).toContain('payhook sign --help');
    const missing = await payhookCli(['verify']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--business-id, --secret or --public-key is required');
    const typo = await payhookCli(['sign', '--busines-id', 'x']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain(
      "Unknown option '--busines-id'. Did you mean --business-id? See: payhook sign --help",
    );
    // Run as a package manager's script (`pnpm -s payhook` in a clone, where payhook is not on the
    // PATH), the command to paste is written that way.
    const viaNpm = await payhookCli(['sign', '--busines-id', 'x'], {
      env: { npm_lifecycle_event: 'payhook', npm_config_user_agent: 'npm/10.8.2 node/v20.0.0 linux x64' },
    });
    expect(viaNpm.stderr).toContain('See: npm run -s payhook -- sign --help');
    const typoCommand = await payhookCli(['tirgger'], {
      env: {
        npm_lifecycle_event: 'payhook',
        npm_config_user_agent: 'pnpm/10.28.1 npm/? node/v20.0.0 linux x64',
      },
    });
    expect(typoCommand.stderr).toBe(
      'payhook: unknown command "tirgger". Did you mean trigger? Run `pnpm -s payhook --help` for the list.\n',
    );
    const event = await payhookCli([
      'trigger',
      'payment.sesion.succeeded',
      '--to',
      'http://127.0.0.1:9/',
      '--business-id',
      BIZ,
    ]);
    expect(event.code).toBe(2);
    expect(event.stderr).toContain(
      'Unknown event "payment.sesion.succeeded". Did you mean payment.session.succeeded?',
    );
    expect(event.stderr).toContain('add --allow-unknown-event');
    const far = await payhookCli([
      'trigger',
      'invoice.paid',
      '--to',
      'http://127.0.0.1:9/',
      '--business-id',
      BIZ,
    ]);
    expect(far.stderr).not.toContain('Did you mean');
    const mode = await payhookCli(['verify', '--business-id', BIZ, '--canonicalization', 'xml']);
    expect(mode.code).toBe(2);
    expect(mode.stderr).toContain('auto, jcs, lexical');
    expect((await payhookCli([])).code).toBe(2);
  });

  it('says what it reads when standard input is a terminal, and not when it is a pipe', async () => {
    // A pseudo-terminal through util-linux's script(1), as a user typing into the command.
    const inTerminal = (args: string) => {
      const child = spawn('script', ['-qec', `exec "${process.execPath}" "${bin}" ${args}`, '/dev/null'], {
        env: cliEnv({ NO_COLOR: '1', SHELL: '/bin/sh' }),
      });
      const run = { child, output: '', error: undefined as Error | undefined };
      child.on('error', (error) => {
        run.error = new Error(`script(1) (util-linux) is needed for this test: ${error.message}`);
      });
      child.stdout.on('data', (chunk) => {
        run.output += chunk;
      });
      return run;
    };
    const sign = inTerminal(`sign --business-id ${BIZ}`);
    const verify = inTerminal(`verify --business-id ${BIZ}`);
    try {
      await expect
        .poll(() => sign.error ?? sign.output, { timeout: 20_000 })
        .toContain(
          "Reading the event's data (JSON) from standard input; end it with Ctrl-D, or see: payhook sign --help",
        );
      sign.child.stdin.write('{"id":"pay_1"}\n');
      sign.child.stdin.write('\x04');
      await expect.poll(() => sign.output, { timeout: 20_000 }).toContain('"checksum"');
      await expect
        .poll(() => verify.error ?? verify.output, { timeout: 20_000 })
        .toContain('from standard input; end it with Ctrl-D, or see: payhook verify --help');
    } finally {
      sign.child.kill();
      verify.child.kill();
    }
    const piped = await payhookCli(['sign', '--business-id', BIZ], { input: '{"id":"pay_1"}' });
    expect(piped.stderr).toBe('');
    const verified = await payhookCli(['verify', '--business-id', BIZ], { input: piped.stdout });
    expect(verified).toMatchObject({ code: 0, stderr: '' });
  });

  it('signs data from stdin and verifies the result (sign | verify)', async () => {
    const data = '{"id":"pay_1","amount":150000,"status":"settled","customer":{"email":"a@example.com"}}';
    const signed = await payhookCli(['sign', '--business-id', BIZ, '--event', 'payment.session.succeeded'], {
      input: data,
    });
    expect(signed.code).toBe(0);
    const payload = JSON.parse(signed.stdout);
    expect(payload).toMatchObject({
      event: 'payment.session.succeeded',
      checksum: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // Data comes out canonical: keys sorted.
    expect(signed.stdout).toContain(
      '"data":{"amount":150000,"customer":{"email":"a@example.com"},"id":"pay_1"',
    );
    const verified = await payhookCli(['verify', '--business-id', BIZ], { input: signed.stdout });
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain(`valid: payment.session.succeeded, signed with business id ${BIZ}`);
    const asJson = await payhookCli(['verify', '--business-id', 'other', '--business-id', BIZ, '--json'], {
      input: signed.stdout,
    });
    expect(JSON.parse(asJson.stdout)).toEqual({
      ok: true,
      event: 'payment.session.succeeded',
      businessId: BIZ,
      canonicalization: 'lexical',
    });
    expect((await payhookCli(['sign', '--business-id', BIZ], { input: '{"id":' })).code).toBe(1);
  });

  it('exits 1 on a tampered payload and explains the mismatch', async () => {
    const signed = await payhookCli(['sign', '--business-id', BIZ], {
      input: '{"amount":150000,"id":"pay_2"}',
    });
    const tampered = signed.stdout.replace('150000', '1');
    const result = await payhookCli(['verify', '--business-id', BIZ], { input: tampered });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('invalid: invalid_checksum');
    // The explanation: the exact string hashed and the checksum the payload carries.
    expect(result.stdout).toContain('payment.session.succeeded|{"amount":1,"id":"pay_2"}');
    expect(result.stdout).toContain(JSON.parse(tampered).checksum);
    const json = JSON.parse(
      (await payhookCli(['verify', '--business-id', BIZ, '--json'], { input: tampered })).stdout,
    );
    expect(json).toMatchObject({
      ok: false,
      error: { code: 'invalid_checksum' },
      explanation: { ok: false },
    });
    const malformed = await payhookCli(['verify', '--business-id', BIZ], {
      input: '{"event":"x","event":"y"}',
    });
    expect(malformed.code).toBe(1);
    // A payload that cannot be read: its error once, with no explanation repeating it.
    expect(malformed.stdout).toMatch(/^invalid: malformed_payload: [^\n]+\n$/);
  });

  it('says once, and plainly, that standard input was empty', async () => {
    const empty = await payhookCli(['verify', '--business-id', BIZ], { input: '' });
    expect(empty.code).toBe(1);
    expect(empty.stdout).toBe(
      'invalid: malformed_payload: nothing was read from standard input (pipe the body in: payhook verify --business-id <id> < body.json)\n',
    );
    expect(empty.stderr).toBe('');
  });

  describe('trigger', () => {
    let target: Awaited<ReturnType<typeof startTriggerReceiver>>;
    let url: string;
    beforeAll(async () => {
      target = await startTriggerReceiver({ businessIds: [BIZ] });
      url = target.url;
    });
    afterAll(() => target?.close());

    it('sends a signed fixture event to a real receiver and prints its answer', async () => {
      const run = await payhookCli([
        'trigger',
        'payment.session.succeeded',
        '--to',
        url,
        '--business-id',
        BIZ,
      ]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('200 OK');
      expect(run.stdout).toContain('{"received":true}');
      const json = await payhookCli([
        'trigger',
        'payment.session.failed',
        '--method',
        'card',
        '--to',
        url,
        '--business-id',
        BIZ,
        '--json',
      ]);
      const parsed = JSON.parse(json.stdout);
      expect(parsed).toMatchObject({
        status: 200,
        body: { received: true },
        payload: { event: 'payment.session.failed' },
      });
      expect(parsed.payload.data).toMatchObject({ status: 'failed', payment_method: { type: 'card' } });
      await expect
        .poll(() => target.handled)
        .toEqual(['payment.session.succeeded', 'payment.session.failed']);
    });

    it('sends data from a file, exits 1 when the receiver refuses and 3 when it cannot be reached', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-'));
      try {
        const file = join(dir, 'data.json');
        await writeFile(file, '{"id":"ref_1","amount":5000}');
        const custom = await payhookCli([
          'trigger',
          'payment.refund.created',
          '--allow-unknown-event',
          '--data',
          file,
          '--to',
          url,
          '--business-id',
          BIZ,
        ]);
        expect(custom.code).toBe(0);
        const refused = await payhookCli([
          'trigger',
          'payment.session.created',
          '--to',
          url,
          '--business-id',
          'wrong-id',
        ]);
        expect(refused.code).toBe(1);
        expect(refused.stdout).toContain('401');
        expect(refused.stdout).toContain('invalid_checksum');
        const closedPort = await freePort();
        const down = await payhookCli([
          'trigger',
          'payment.session.created',
          '--to',
          `http://127.0.0.1:${closedPort}/`,
          '--business-id',
          BIZ,
        ]);
        expect(down.code).toBe(3);
        expect(down.stderr).toContain('ECONNREFUSED');
        const missing = await payhookCli([
          'trigger',
          'payment.session.created',
          '--data',
          join(dir, 'none.json'),
          '--to',
          url,
          '--business-id',
          BIZ,
        ]);
        expect(missing.code).toBe(2);
        expect(missing.stderr).toContain('ENOENT');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  it('runs the demo: every event the sender recorded delivered, verified and handled once', async () => {
    const run = await payhookCli(['demo', '--json'], {
      // The demo ignores these: it runs on its own embedded defaults.
      env: { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1' },
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({
      ok: true,
      events: 10,
      delivered: 10,
      handled: 10,
      retried: 1,
      forgedRefused: true,
      problems: [],
    });
    // The event retried after the 503 goes to onStale when its payment's later event came first.
    expect(summary.stale).toBeLessThanOrEqual(1);
    const plain = await payhookCli(['demo']);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain('handled exactly once         10');
    // Two demos, each about 15 s on an idle machine: the limit is a hang guard for a busy one.
  }, 180_000);
});
