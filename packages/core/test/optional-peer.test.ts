// @module-tag process
// @module-tag build
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));
let app: string;

// The built files in an app where @opentelemetry/api is not installed: core's dependencies only.
beforeAll(() => {
  if (!existsSync(`${root}dist/index.cjs`))
    throw new Error('packages/core/dist is missing: run `pnpm build`');
  app = mkdtempSync(join(tmpdir(), 'payhook-no-otel-'));
  const core = join(app, 'node_modules/@payhook/core');
  mkdirSync(core, { recursive: true });
  cpSync(`${root}package.json`, join(core, 'package.json'));
  cpSync(`${root}dist`, join(core, 'dist'), { recursive: true });
  for (const dependency of ['typebox']) {
    symlinkSync(
      realpathSync(`${root}node_modules/${dependency}`),
      join(app, 'node_modules', dependency),
      'dir',
    );
  }
});
afterAll(() => rmSync(app, { recursive: true, force: true }));

const body = (load: string) => `${load}
const BIZ = 'b2c1d0e9-1f2a-4b3c-8d4e-5f6a7b8c9d0e';
const main = async () => {
  const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
  const handled = [];
  receiver.onAny((event) => void handled.push(event.event));
  const result = await receiver.handle({
    method: 'POST', contentType: 'application/json', remoteAddress: '127.0.0.1',
    headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    rawBody: JSON.stringify(createTestEvent('payment.session.created', BIZ)),
  });
  result.afterResponse();
  await receiver.idle();
  let refused = '';
  try { createReceiver({ businessIds: [BIZ], allowAnyIp: true, tracing: true }); } catch (error) { refused = error.message; }
  console.log(JSON.stringify({ status: result.status, handled, refused }));
};
main();
`;

describe('without @opentelemetry/api installed', () => {
  it.each([
    [
      'CommonJS',
      'cjs',
      `const { createReceiver } = require('@payhook/core');\nconst { createTestEvent } = require('@payhook/core/testing');`,
    ],
    [
      'ESM',
      'mjs',
      `import { createReceiver } from '@payhook/core';\nimport { createTestEvent } from '@payhook/core/testing';`,
    ],
  ])('the %s build receives and handles events, and refuses tracing: true', (_name, extension, load) => {
    const file = join(app, `main.${extension}`);
    writeFileSync(file, body(load));
    // Without NODE_PATH, which pnpm sets to its store, where the package is.
    const { NODE_PATH: _, ...env } = process.env;
    const run = spawnSync(process.execPath, [file], { cwd: app, env, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      status: 200,
      handled: ['payment.session.created'],
      refused: 'tracing needs @opentelemetry/api: install it beside @payhook/core.',
    });
    // Not installed is the ordinary case: nothing printed about it.
    expect(run.stderr).toBe('');
  });
});
