import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { closest, type Io, stdinPrompt } from '../src/command.js';
import { commandLine } from '../src/invocation.js';
import { logFormat, logStream, say } from '../src/log-format.js';

/** Streams of a command run, its standard output a terminal or not. */
function streams(isTTY: boolean) {
  let written = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      written += chunk;
      done();
    },
  });
  const stdout = Object.assign(sink, { isTTY });
  const io: Io = { stdout, stderr: new PassThrough(), stdin: new PassThrough(), env: { NO_COLOR: '1' } };
  return { io, written: () => written };
}

describe('what the command writes', () => {
  it('says what it awaits on a terminal only', () => {
    expect(stdinPrompt(true, 'sign', "the event's data (JSON)", {})).toBe(
      "Reading the event's data (JSON) from standard input; end it with Ctrl-D, or see: payhook sign --help\n",
    );
    expect(stdinPrompt(false, 'sign', 'x', {})).toBe('');
    expect(stdinPrompt(undefined, 'verify', 'x', {})).toBe('');
  });

  it('writes the command lines to paste as the command was run: a package manager script, npx, or payhook', () => {
    const run = (agent: string, script = 'payhook') =>
      commandLine('endpoints add http://localhost:3000/webhooks', {
        npm_lifecycle_event: script,
        npm_config_user_agent: agent,
      });
    expect(run('pnpm/10.28.1 npm/? node/v20.0.0 linux x64')).toBe(
      'pnpm -s payhook endpoints add http://localhost:3000/webhooks',
    );
    expect(run('npm/10.8.2 node/v20.0.0 linux x64 workspaces/false')).toBe(
      'npm run -s payhook -- endpoints add http://localhost:3000/webhooks',
    );
    expect(run('yarn/1.22.22 npm/? node/v20.0.0 linux x64')).toBe(
      'yarn -s payhook endpoints add http://localhost:3000/webhooks',
    );
    expect(run('bun/1.2.0 npm/? node/v20.0.0 linux x64', 'cli:dev')).toBe(
      'bun run cli:dev endpoints add http://localhost:3000/webhooks',
    );
    // `npx payhook` runs as npm's event `npx`, not as a script of the project.
    expect(run('npm/10.8.2 node/v20.0.0 linux x64 workspaces/false', 'npx')).toBe(
      'npx payhook endpoints add http://localhost:3000/webhooks',
    );
    // A script name the shell would split is quoted.
    expect(run('pnpm/10.28.1 npm/? node/v20.0.0 linux x64', "it's mine")).toBe(
      `pnpm -s 'it'\\''s mine' endpoints add http://localhost:3000/webhooks`,
    );
    // Run directly, or by a program that is not a package manager: payhook.
    expect(commandLine('keys list', {})).toBe('payhook keys list');
    expect(commandLine('keys list', { npm_config_user_agent: 'pnpm/10.28.1' })).toBe('payhook keys list');
    expect(
      commandLine('keys list', { npm_lifecycle_event: 'payhook', npm_config_user_agent: 'deno/2' }),
    ).toBe('payhook keys list');
  });

  it('suggests the nearest name for a typo, and none for a different word', () => {
    expect(closest('--busines-id', ['--business-id', '--event', '--help'])).toBe('--business-id');
    expect(
      closest('payment.sesion.succeeded', ['payment.session.created', 'payment.session.succeeded']),
    ).toBe('payment.session.succeeded');
    expect(closest('invoice.paid', ['payment.session.created', 'payment.session.succeeded'])).toBeUndefined();
    expect(closest('--x', ['--id'])).toBeUndefined();
  });

  it("writes serve's log as readable lines on a terminal and as JSON lines when piped", () => {
    expect(logFormat(undefined, streams(true).io)).toBe('pretty');
    expect(logFormat(undefined, streams(false).io)).toBe('json');
    expect(logFormat('json', streams(true).io)).toBe('json');
    expect(logFormat('pretty', streams(false).io)).toBe('pretty');

    const line = {
      level: 30,
      time: Date.UTC(2026, 0, 1, 12, 0, 0),
      pid: 1,
      hostname: 'h',
      reqId: 'req-1',
      req: { method: 'POST', url: '/payment-sessions' },
      res: { statusCode: 201 },
      responseTime: 3.4,
      msg: 'request completed',
      deliveryId: 'del_1',
    };
    const pretty = streams(true);
    logStream('pretty', pretty.io).write(`${JSON.stringify(line)}\n`);
    expect(pretty.written()).toMatch(
      /^\d\d:\d\d:\d\d {2}INFO {3}request completed {2}POST \/payment-sessions {2}201 {2}3 ms {2}deliveryId=del_1\n$/,
    );
    const warn = streams(true);
    logStream('pretty', warn.io).write(
      `${JSON.stringify({ level: 50, time: 0, msg: 'gave up', err: { message: 'boom' } })}\n`,
    );
    expect(warn.written()).toMatch(/ERROR {2}gave up {2}boom\n$/);

    const json = streams(false);
    logStream('json', json.io).write(`${JSON.stringify(line)}\n`);
    say('json', json.io, '  Receivers verify with BUSINESS_ID=biz_1', { businessId: 'biz_1' });
    const [passed, own] = json
      .written()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(passed).toEqual(line);
    expect(own).toMatchObject({
      level: 30,
      msg: 'Receivers verify with BUSINESS_ID=biz_1',
      businessId: 'biz_1',
    });
    expect(own.time).toEqual(expect.any(Number));
  });
});
