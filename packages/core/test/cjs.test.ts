// @module-tag process
// @module-tag build
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));

// The built files, as a CommonJS consumer loads them. typebox ships ESM only: the CommonJS build
// requires it (Node 20.19+ loads ESM with require()) rather than carrying a copy of its own.
describe('the CommonJS build', () => {
  it('exists (run the build first)', () => {
    expect(existsSync(`${root}dist/index.cjs`), 'packages/core/dist is missing: run `pnpm build`').toBe(true);
  });

  it("loads with require('@payhook/core') and verifies an event", () => {
    const script = `
      const core = require('@payhook/core');
      const { signEvent, createTestPayment } = require('@payhook/core/testing');
      const payload = signEvent('payment.session.created', createTestPayment(), 'biz');
      const result = core.verifyChecksum({ rawBody: JSON.stringify(payload) }, { businessIds: ['biz'] });
      const receiver = core.createReceiver({ businessIds: ['biz'], allowAnyIp: true, recoveryIntervalMs: 0 });
      console.log(JSON.stringify({ ok: result.ok, parsed: core.parseEvent(payload).kind, receiver: typeof receiver.handle }));
    `;
    const run = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ ok: true, parsed: 'known', receiver: 'function' });
    // No ExperimentalWarning (or any other line) from loading the ESM-only dependency.
    expect(run.stderr).toBe('');
  });

  it('requires its dependencies rather than bundling them', () => {
    const cjs = readFileSync(`${root}dist/index.cjs`, 'utf8');
    expect(cjs).toContain('require("typebox")');
    expect(cjs).not.toContain('node_modules/');
  });
});
