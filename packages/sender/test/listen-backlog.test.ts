// @module-tag pglite
// @module-tag process
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig, startSender } from '../src/index.js';
import { LISTEN_BACKLOG } from '../src/service.js';
import { openTestDatabase } from './fixtures/storage.js';

// A flood of clients connecting at once finds the sender busy: the connections it has not
// accepted yet wait in the listening socket's queue. Node's default queue (511) overflowed under
// 4,000 of them, and the kernel reset some; the sender asks for 4,096 (the kernel caps it at
// net.core.somaxconn). The queue's length is what `ss` shows as a listening socket's Send-Q.

describe("the sender's listening socket", { timeout: 60_000 }, () => {
  it('queues as many connections not yet accepted as the kernel allows, up to 4,096', async () => {
    const { database, cleanup } = await openTestDatabase('pglite', 'backlog');
    const service = await startSender({ config: loadConfig({ PORT: '0' }), database, logger: false });
    try {
      const { port } = new URL(service.url);
      const line = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim();
      // State, Recv-Q (connections waiting now), Send-Q (the queue's length), then the addresses.
      const [state, , queue] = line.split(/\s+/);
      expect(state).toBe('LISTEN');
      const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
      expect(Number(queue)).toBe(Math.min(LISTEN_BACKLOG, somaxconn));
    } finally {
      await service.close();
      await cleanup();
    }
  });
});
