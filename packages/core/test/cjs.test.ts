import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));

// The built files, as a CommonJS consumer loads them (Node 20 has no require(esm): the ESM-only
// dependencies must be bundled into the CJS build).
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
    const out = execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ ok: true, parsed: 'known', receiver: 'function' });
  });
});
