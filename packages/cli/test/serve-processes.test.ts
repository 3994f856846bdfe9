// @module-tag process
// @module-tag build
// @module-tag postgres
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionRequest } from '../../sender/test/fixtures/requests.js';
import { childrenOf, exitCode, payhookCli, startServe, whileServing } from './run-cli.js';

const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const BIZ = 'c1d2e3f4-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
const ENV = { NO_COLOR: '1', LOG_LEVEL: 'info', DATABASE_URL: '', PAYHOOK_API_KEYS: '' };

/** A request over a connection of its own (no keep-alive): the primary hands each to a process in turn. */
function post(base: string, path: string, apiKey: string, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, {
      method: path === '/accounts/settings' ? 'PATCH' : 'POST',
      agent: false,
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

let admin: pg.Client;
let databaseUrl: string;
let database: string;
let receiver: Server;
let receiverUrl: string;
/** `payment.session.created` deliveries by payment id. */
const arrived = new Map<string, number>();

beforeAll(async () => {
  admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect().catch((error: Error) => {
    throw new Error(
      `PostgreSQL at TEST_DATABASE_URL (${TEST_DATABASE_URL}) is not reachable: ${error.message}`,
    );
  });
  database = `payhook_cli_processes_${randomBytes(4).toString('hex')}`;
  await admin.query(`create database ${database}`);
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  databaseUrl = url.toString();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      res.writeHead(200).end();
      const event = JSON.parse(body) as { event: string; data: { id: string } };
      if (event.event === 'payment.session.created')
        arrived.set(event.data.id, (arrived.get(event.data.id) ?? 0) + 1);
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`;
});

afterAll(async () => {
  receiver?.closeAllConnections();
  receiver?.close();
  await admin?.query(`drop database if exists ${database} with (force)`);
  await admin?.end();
});

describe('payhook serve --processes', { timeout: 300_000 }, () => {
  it('runs the sender in several processes on one port; one that dies is replaced, and none loses an event', async () => {
    const serve = await startServe(databaseUrl, BIZ, ['--allow-private-webhooks', '--processes', '2'], ENV);
    await whileServing(serve, async () => {
      expect(serve.out).toMatch(
        /"msg":"payhook sender listening on http:\/\/127\.0\.0\.1:\d+ \(postgres, 2 processes\)"/,
      );
      const first = childrenOf(serve.child.pid);
      expect(first).toHaveLength(2);
      expect(await post(serve.url, '/accounts/settings', serve.apiKey, { webhook_urls: [receiverUrl] })).toBe(
        200,
      );

      // Sessions over connections of their own: both processes answer, every event arrives once.
      const create = async (n: number) => {
        for (let i = 0; i < n; i++)
          expect(await post(serve.url, '/payment-sessions', serve.apiKey, sessionRequest)).toBe(201);
      };
      await create(40);
      await expect.poll(() => arrived.size, { timeout: 60_000 }).toBe(40);
      expect([...arrived.values()].every((n) => n === 1)).toBe(true);
      const answeredBy = new Set(
        serve.out
          .split('\n')
          .filter((line) => line.includes('"incoming request"') && line.includes('/payment-sessions'))
          .map((line) => (JSON.parse(line) as { pid: number }).pid),
      );
      expect([...answeredBy].sort()).toEqual([...first].sort());

      // One killed: the primary starts another, which listens, and the sender goes on.
      const listening = () => serve.out.split('"msg":"Server listening at').length - 1;
      expect(listening()).toBe(2);
      process.kill(first[0] as number, 'SIGKILL');
      await expect.poll(listening, { timeout: 60_000 }).toBe(3);
      const now = childrenOf(serve.child.pid);
      expect(now).toHaveLength(2);
      expect(now).not.toContain(first[0]);
      expect(serve.out).toContain('exited with signal SIGKILL: starting another');
      await create(40);
      await expect.poll(() => arrived.size, { timeout: 90_000 }).toBe(80);

      // SIGTERM stops the primary and every process, gracefully.
      const primary = serve.child.pid;
      serve.child.kill('SIGTERM');
      expect(await exitCode(serve.child)).toBe(0);
      expect(childrenOf(primary)).toEqual([]);
    });
  });

  it('stops a process asked to stop while it starts: a stop during a replacement leaves no process behind', async () => {
    const serve = await startServe(databaseUrl, BIZ, ['--processes', '2'], ENV);
    const [victim] = childrenOf(serve.child.pid);
    process.kill(victim as number, 'SIGKILL');
    // The replacement is forked (a second later) and still opening its pool when the stop comes.
    await expect
      .poll(() => childrenOf(serve.child.pid).filter((pid) => pid !== victim).length, { timeout: 30_000 })
      .toBe(2);
    const primary = serve.child.pid;
    serve.child.kill('SIGTERM');
    expect(await exitCode(serve.child)).toBe(0);
    expect(childrenOf(primary)).toEqual([]);
  });

  it("says, with the server's figures, when its processes may open more connections than the server has free", async () => {
    const max = Number((await admin.query('show max_connections')).rows[0].max_connections);
    // 2 x (500 + 6) connections at most: more than a server of the default 100, or of 1,000, has free.
    const serve = await startServe(databaseUrl, BIZ, ['--processes', '2'], {
      ...ENV,
      PAYHOOK_DB_POOL_SIZE: '500',
    });
    await whileServing(serve, async () => {
      const line = serve.out
        .split('\n')
        .map((l) => (l.startsWith('{') ? JSON.parse(l) : {}))
        .find((l) => String(l.msg).startsWith('2 sender processes may open 1012 connections'));
      expect(line).toMatchObject({ max, perProcess: 506, processes: 2 });
      expect(line.free).toBe(line.max - line.reserved - line.inUse);
      expect(line.msg).toContain("the server's max_connections is");
      // Run as asked all the same: a pooler in front may make the server's count no limit.
      expect(serve.out).toMatch(/"msg":"payhook sender listening on [^"]+ \(postgres, 2 processes\)"/);
      expect(childrenOf(serve.child.pid)).toHaveLength(2);
    });
  });

  it('refuses several processes on PGlite, and a count it cannot read, before anything is made', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-cli-processes-'));
    try {
      const pglite = await payhookCli(
        ['serve', '--port', '0', '--data-dir', join(dir, 'data'), '--processes', '2'],
        {
          env: ENV,
        },
      );
      expect(pglite.code).toBe(2);
      expect(pglite.stderr).toContain('--processes 2 needs PostgreSQL (--database-url)');
      for (const bad of ['0', 'two', '1.5', '999']) {
        const run = await payhookCli(
          ['serve', '--port', '0', '--database-url', databaseUrl, '--processes', bad],
          {
            env: ENV,
          },
        );
        expect(run.code).toBe(2);
        expect(run.stderr).toContain(
          '--processes (PAYHOOK_PROCESSES) takes a number from 1 to 256 or "auto"',
        );
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
