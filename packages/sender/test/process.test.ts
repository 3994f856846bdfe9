// @module-tag process
// @module-tag build
// @module-tag pglite
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../test/support/free-port.js';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';

const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const library = new URL('../dist/index.js', import.meta.url).href;

// The built service as `pnpm --filter @payhook/sender start` runs it.
describe('the sender process', { timeout: 90_000 }, () => {
  it('starts on PGlite from the environment, serves /healthz, and exits 0 on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-main-'));
    // An existing, migrated database, as on every start after the first (making one from nothing
    // is database.test.ts's, and `payhook serve`'s first start the CLI's tests').
    await copyPgliteTemplate(join(dir, 'data'));
    const port = await freePort();
    const child = spawn(process.execPath, [main], {
      env: {
        ...process.env,
        PORT: String(port),
        PAYHOOK_DATA_DIR: join(dir, 'data'),
        DATABASE_URL: '',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      // A hang guard only: a start on a machine busy with other tests has taken over 30 s.
      const deadline = Date.now() + 60_000;
      let status = 0;
      while (status !== 200 && Date.now() < deadline) {
        status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('exits 2 naming the variable on bad configuration', async () => {
    const child = spawn(process.execPath, [main], {
      env: { ...process.env, PORT: 'eighty' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr?.on('data', (chunk) => (err += chunk));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(err).toContain('PORT');
    const level = spawn(process.execPath, [main], {
      env: { ...process.env, LOG_LEVEL: 'verbose' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let levelErr = '';
    level.stderr?.on('data', (chunk) => (levelErr += chunk));
    expect((await once(level, 'exit'))[0]).toBe(2);
    expect(levelErr).toContain(
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, not "verbose".',
    );
    expect(levelErr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('ends when its work is done with a PGlite database left open: the idle thread holds nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-open-'));
    try {
      await copyPgliteTemplate(join(dir, 'data'));
      const script = `
        const { openDatabase } = await import(${JSON.stringify(library)});
        const database = await openDatabase({ dataDir: ${JSON.stringify(join(dir, 'data'))} });
        const rows = await database.db.selectFrom('events').select('id').execute();
        console.log('read', rows.length);`;
      await writeFile(join(dir, 'script.mjs'), script);
      const child = spawn(process.execPath, [join(dir, 'script.mjs')], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout?.on('data', (chunk) => (out += chunk));
      let err = '';
      child.stderr?.on('data', (chunk) => (err += chunk));
      // A thread kept referenced would keep the process: it is killed after 20 s and fails here.
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = await once(child, 'exit');
      clearTimeout(timer);
      expect({ out, err }).toMatchObject({ out: expect.stringContaining('read 0'), err: '' });
      expect({ code, signal }).toEqual({ code: 0, signal: null });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
