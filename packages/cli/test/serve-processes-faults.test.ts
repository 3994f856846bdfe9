// @module-tag process
// @module-tag build
// @module-tag postgres
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import { type ScratchPostgres, startScratchPostgres } from '../../sender/test/fixtures/scratch-postgres.js';
import { childrenOf, exitCode, startServe, whileServing } from './run-cli.js';

// `payhook serve --processes 2` on a PostgreSQL cluster of the test's own, while four clients
// create sessions without pause: its sessions terminated, the server crashed and restarted, stopped
// for a while, then frozen (SIGSTOP) and thawed. Both processes live through every fault, every
// answer is a 201 or a 503 that says the database is away, and every session acknowledged reaches
// the receiver within 15 s of the database's return.

const BIZ = 'd4c3b2a1-6f5e-4d7c-8b9a-0f1e2d3c4b5a';
const ENV = {
  NO_COLOR: '1',
  LOG_LEVEL: 'info',
  PAYHOOK_API_KEYS: '',
  // Tighter than the defaults, as in the one-process fault test, so that answers stay quick.
  PAYHOOK_DB_ACQUIRE_TIMEOUT_MS: '1000',
  PAYHOOK_DB_STATEMENT_TIMEOUT_MS: '1500',
};
const CLIENTS = 4;
/** The longest from the database's return to the arrival of every session acknowledged. */
const DELIVERED_WITHIN_MS = 15_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  status: number;
  code?: string;
  id?: string;
}

let db: ScratchPostgres;
let receiver: LoopbackReceiver;

beforeAll(async () => {
  db = await startScratchPostgres();
  receiver = await startLoopbackReceiver();
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await db?.destroy();
});

/** The ids of the sessions whose `payment.session.created` event reached the receiver. */
function delivered(): Set<string> {
  const ids = new Set<string>();
  for (const r of receiver.received) {
    const body = JSON.parse(r.body) as { event: string; data: { id: string } };
    if (body.event === 'payment.session.created') ids.add(body.data.id);
  }
  return ids;
}

describe('payhook serve --processes through database faults', { timeout: 300_000 }, () => {
  it('keeps both processes through terminated sessions, a crash, a stop and a freeze, and delivers every acknowledged session', async () => {
    const serve = await startServe(db.url, BIZ, ['--allow-private-webhooks', '--processes', '2'], ENV);
    let n = 0;
    const create = async (answers: Answer[]) => {
      try {
        const res = await fetch(`${serve.url}/payment-sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${serve.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ...sessionRequest, reference: `processes-fault-${n++}` }),
          signal: AbortSignal.timeout(20_000),
        });
        const body = (await res.json()) as { data?: { payment: { id: string } }; error?: { code: string } };
        answers.push({ status: res.status, code: body.error?.code, id: body.data?.payment.id });
        if (res.status === 503) await sleep(50);
      } catch {
        answers.push({ status: 0 });
        await sleep(50);
      }
    };
    await whileServing(serve, async () => {
      const settings = await fetch(`${serve.url}/accounts/settings`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${serve.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ webhook_urls: [receiver.url] }),
      });
      expect(settings.status).toBe(200);
      const processes = childrenOf(serve.child.pid);
      expect(processes).toHaveLength(2);

      const faults: [string, () => Promise<void>][] = [
        ['sessions terminated', async () => void (await db.terminateClients())],
        ['a crash and restart', () => db.crashRestart()],
        [
          'a stop of 3 s',
          async () => {
            await db.stop();
            await sleep(3000);
            await db.start();
          },
        ],
        [
          'a freeze of 3 s',
          async () => {
            db.freeze();
            await sleep(3000);
            db.thaw();
          },
        ],
      ];
      for (const [name, fault] of faults) {
        const answers: Answer[] = [];
        let stopped = false;
        const load = Promise.all(
          Array.from({ length: CLIENTS }, async () => {
            while (!stopped) await create(answers);
          }),
        );
        await sleep(1000);
        await fault();
        const back = Date.now();
        const before = answers.length;
        // Load on a database that is back, until a session is created after the fault.
        while (!answers.slice(before).some((a) => a.status === 201)) await sleep(50);
        await sleep(500);
        stopped = true;
        await load;

        const wrong = answers.filter(
          (a) => !(a.status === 201 || (a.status === 503 && a.code === 'database_unavailable')),
        );
        expect(wrong, name).toEqual([]);
        const acknowledged = answers.flatMap((a) => (a.status === 201 && a.id ? [a.id] : []));
        expect(acknowledged.length, name).toBeGreaterThan(0);
        let missing = acknowledged;
        while (missing.length > 0 && Date.now() - back < DELIVERED_WITHIN_MS) {
          await sleep(100);
          const arrived = delivered();
          missing = acknowledged.filter((id) => !arrived.has(id));
        }
        expect(missing, `${name}: acknowledged sessions not delivered within 15 s`).toEqual([]);
        // The same two processes: a fault of the database is no reason to restart one.
        expect(childrenOf(serve.child.pid).sort(), name).toEqual([...processes].sort());
      }

      serve.child.kill('SIGTERM');
      expect(await exitCode(serve.child)).toBe(0);
    });
  });
});
