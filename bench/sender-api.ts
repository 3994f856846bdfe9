/**
 * pnpm bench:sender-api — payment sessions created per second (POST /payment-sessions) and their
 * latency, on PostgreSQL and on PGlite, side by side with a bare Fastify route that does one INSERT
 * of the same row into the same `payments` table, through the same Kysely instance of the same
 * opened database. Target on PostgreSQL: the sender at least 0.5x the bare route's sessions/s; on
 * PGlite the figures are reported only.
 *
 * Method: for each storage, one child process (this file, run with `serve`) opens the database
 * with `openDatabase` (PostgreSQL: a random schema made for the run and dropped at the end; PGlite:
 * a temporary directory removed at the end), builds the sender with `buildApp` (logger off, one
 * configured test-mode API key, no webhook URL registered, so each session writes its customer,
 * payment and event rows and no delivery row) and the bare Fastify app, and listens on two loopback
 * ports. The servers run in a child process so that autocannon does not share their event loop
 * (and PGlite's data directory lock is held by one process only); both apps share the child's
 * database, so the comparison isolates the sender's work per request. Each route gets a 1 s
 * warm-up, then BENCH_DURATION seconds (default 8) with 10 connections, bare first. Every request
 * is the same realistic session body (bank_account, NGN 150,000, a customer object and
 * metadata.order) without a reference: the sender generates one, and so does the bare route.
 *
 * Then the cost of webhook endpoints' filters, which the session's statement checks when it fans
 * the event out: the sender again (a new child on the same database), first with one endpoint of
 * the business taking `payment.session.created` (one delivery row a session), then with 10,000
 * endpoints in the table (9,980 of 499 other businesses, and 19 more of this business whose
 * filters leave the event out), still one delivery row a session. Same request, same rows
 * written: the difference is the filter check.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildApp, loadConfig, openDatabase } from '@payhook/sender';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';

import {
  BENCH_BUSINESS_ID,
  BENCH_DATABASE_URL as DATABASE_URL,
  onEachStorage,
  printTable,
  writeResults,
} from './lib.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = 10;
const TARGET = 0.5;
const API_KEY = 'sk_test_bench_sender_api';
const SESSION_TTL_MS = 3600 * 1000;

const customer = {
  first_name: 'Funke',
  last_name: 'Balogun',
  email: 'funke@example.com',
  phone_number: '+2348099999999',
  billing_address: {
    line1: '9 Allen Ave',
    line2: '',
    city: 'Ikeja',
    state: 'Lagos',
    zip_code: '100271',
    country: 'NG',
  },
};
const BODY = JSON.stringify({
  description: 'E-book order ORD-9',
  currency: 'NGN',
  amount: 150_000,
  customer,
  metadata: {
    order: {
      identifier: 'ORD-9',
      items: [
        { name: 'E-book', type: 'digital' },
        { name: 'Reading lamp', type: 'physical' },
      ],
    },
  },
  payment_method: { type: 'bank_account' },
});

type Storage = 'postgres' | 'pglite';
/** The endpoints a child adds before serving: none, one taking the event, or the 10,000. */
type Scenario = 'none' | 'one' | 'filtered';
const CREATED = 'payment.session.created';
type Counts = { payments: number; events: number; deliveries: number; customers: number };

/** The bare route: one INSERT of a row shaped like the sender's (same columns, similar `data`). */
function bareApp(db: Awaited<ReturnType<typeof openDatabase>>['db']): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
  app.post<{ Body: Record<string, unknown> }>('/payment-sessions', async (request, reply) => {
    const body = request.body;
    const now = new Date();
    const payment = {
      id: randomUUID(),
      reference: `ref_${randomBytes(12).toString('hex')}`,
      correlation_id: randomUUID(),
      amount: body.amount,
      currency: body.currency,
      description: body.description,
      date: now.toISOString(),
      status: 'pending',
      cancellation_reason: null,
      mode: 'test',
      customer: { id: randomUUID(), ...(body.customer as object), business_id: BENCH_BUSINESS_ID },
      metadata: body.metadata,
      payment_method: null,
    };
    await db
      .insertInto('payments')
      .values({
        id: payment.id,
        business_id: BENCH_BUSINESS_ID,
        mode: 'test',
        reference: payment.reference,
        status: 'pending',
        method_type: (body.payment_method as { type?: string } | undefined)?.type ?? null,
        data: JSON.stringify(payment),
        expires_at: new Date(now.getTime() + SESSION_TTL_MS),
      })
      .execute();
    reply.code(201);
    return { data: payment };
  });
  return app;
}

/** Child process: opens the database, serves the sender and the bare route, prints both ports. */
async function serve(storage: Storage, where: string, scenario: Scenario): Promise<void> {
  const database = await openDatabase(
    storage === 'postgres' ? { url: DATABASE_URL, schema: where } : { dataDir: where },
  );
  if (scenario === 'one') {
    await database.db
      .insertInto('webhook_endpoints')
      .values({
        business_id: BENCH_BUSINESS_ID,
        mode: 'test',
        url: 'https://merchant.example/hooks',
        enabled_events: JSON.stringify([CREATED]),
        account_secrets: true,
      })
      .execute();
  } else if (scenario === 'filtered') {
    // 19 more of this business that leave the event out, and 9,980 of other businesses.
    await sql`insert into webhook_endpoints (business_id, mode, url, enabled_events, account_secrets)
      select ${BENCH_BUSINESS_ID}, 'test', 'https://merchant.example/other/' || g,
             case when g % 2 = 0 then '["payment.session.failed"]'::jsonb
                  else '["payment.session.succeeded"]'::jsonb end, true
      from generate_series(1, 19) g`.execute(database.db);
    await sql`insert into webhook_endpoints (business_id, mode, url, account_secrets)
      select 'bench-other-' || (g / 20), 'test', 'https://other-' || g || '.example/', true
      from generate_series(1, 9980) g`.execute(database.db);
  }
  const config = {
    ...loadConfig({}),
    apiKeys: [{ key: API_KEY, businessId: BENCH_BUSINESS_ID, mode: 'test' as const }],
    sessionTtlSeconds: SESSION_TTL_MS / 1000,
  };
  const sender = await buildApp({ database, config, logger: false });
  const bare = bareApp(database.db);
  await sender.listen({ port: 0, host: '127.0.0.1' });
  await bare.listen({ port: 0, host: '127.0.0.1' });
  const port = (app: FastifyInstance) => (app.server.address() as AddressInfo).port;
  process.stdout.write(`${JSON.stringify({ sender: port(sender), bare: port(bare) })}\n`);
  process.once('SIGTERM', async () => {
    await sender.close();
    await bare.close();
    const count = async (table: 'payments' | 'events' | 'deliveries' | 'customers') =>
      Number(
        (
          await database.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const counts: Counts = {
      payments: await count('payments'),
      events: await count('events'),
      deliveries: await count('deliveries'),
      customers: await count('customers'),
    };
    await database.close();
    process.stdout.write(`${JSON.stringify(counts)}\n`);
    process.exit(0);
  });
}

async function start(storage: Storage, where: string, scenario: Scenario) {
  const script = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', script, 'serve', storage, where, scenario], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`${storage} server exited with ${code}`))),
  );
  exited.catch(() => {});
  const next = async (watchExit: boolean) => {
    const line = watchExit ? await Promise.race([lines.next(), exited]) : await lines.next();
    if (line.done) throw new Error(`${storage} server closed its output`);
    return JSON.parse(line.value);
  };
  const ports = (await next(true)) as { sender: number; bare: number };
  return {
    child,
    ports,
    /** Stops the server and returns the rows it counted before closing the database. */
    async stop(): Promise<Counts> {
      const counts = next(false) as Promise<Counts>;
      child.kill('SIGTERM');
      return counts;
    },
  };
}

function load(port: number, duration: number) {
  return autocannon({
    url: `http://127.0.0.1:${port}/payment-sessions`,
    connections: CONNECTIONS,
    duration,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: BODY,
  });
}

type Result = { rps: number; p50: number; p99: number; requests: number; non2xx: number; errors: number };

type Filtered = { one: Result; filtered: Result; endpoints: number };
type Measured = Record<'bare' | 'sender', Result> & Counts & { endpoints: Filtered };

async function measure(storage: Storage, where: string): Promise<Measured> {
  const server: { child: ChildProcess; ports: { sender: number; bare: number }; stop(): Promise<Counts> } =
    await start(storage, where, 'none');
  const out: Partial<Record<'bare' | 'sender', Result>> = {};
  try {
    for (const route of ['bare', 'sender'] as const) {
      await load(server.ports[route], 1); // warm-up
      const r = await load(server.ports[route], DURATION);
      out[route] = {
        rps: r.requests.average,
        p50: r.latency.p50,
        p99: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
      };
    }
  } catch (error) {
    server.child.kill('SIGTERM');
    throw error;
  }
  await server.stop();
  const endpoints: Partial<Record<'one' | 'filtered', Result>> = {};
  let counts: Counts | undefined;
  for (const scenario of ['one', 'filtered'] as const) {
    const child = await start(storage, where, scenario);
    try {
      await load(child.ports.sender, 1); // warm-up
      const r = await load(child.ports.sender, DURATION);
      endpoints[scenario] = {
        rps: r.requests.average,
        p50: r.latency.p50,
        p99: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
      };
    } catch (error) {
      child.child.kill('SIGTERM');
      throw error;
    }
    counts = await child.stop();
  }
  return {
    ...(out as Record<'bare' | 'sender', Result>),
    ...(counts as Counts),
    endpoints: { ...(endpoints as Record<'one' | 'filtered', Result>), endpoints: 10_000 },
  };
}

async function main(): Promise<void> {
  console.log(
    `POST /payment-sessions (${BODY.length}-byte body), ${DURATION} s per run, ${CONNECTIONS} connections; ` +
      'first no webhook endpoint, so no delivery rows are written\n',
  );
  const results = await onEachStorage('sender', measure);

  const rows: string[][] = [];
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (!r) continue;
    for (const route of ['bare', 'sender'] as const) {
      const x = r[route];
      rows.push([
        storage === 'postgres' ? 'PostgreSQL' : 'PGlite',
        route === 'bare' ? 'bare INSERT' : 'sender',
        Math.round(x.rps).toLocaleString('en-US'),
        `${x.p50} ms`,
        `${x.p99} ms`,
        String(x.non2xx + x.errors),
        (x.rps / r.bare.rps).toFixed(2),
        (x.p99 / Math.max(r.bare.p99, 1)).toFixed(2),
      ]);
    }
  }
  printTable(['storage', 'route', 'sessions/s', 'p50', 'p99', 'failed', 'x sessions/s', 'x p99'], rows);
  const filterRows: string[][] = [];
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (!r) continue;
    for (const scenario of ['one', 'filtered'] as const) {
      const x = r.endpoints[scenario];
      filterRows.push([
        storage === 'postgres' ? 'PostgreSQL' : 'PGlite',
        scenario === 'one' ? '1' : '10,000',
        Math.round(x.rps).toLocaleString('en-US'),
        `${x.p50} ms`,
        `${x.p99} ms`,
        String(x.non2xx + x.errors),
        (x.rps / r.endpoints.one.rps).toFixed(2),
      ]);
    }
  }
  console.log('\nwith webhook endpoints (one delivery row a session either way):');
  printTable(['storage', 'endpoints', 'sessions/s', 'p50', 'p99', 'failed', 'x 1 endpoint'], filterRows);
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (r)
      console.log(
        `${storage}: ${r.payments} payments, ${r.customers} customers, ${r.events} events, ${r.deliveries} deliveries written`,
      );
  }
  console.log(`\nresults written to ${writeResults('sender-api', results).replace(process.cwd(), '.')}`);

  const pgRatio = results.postgres ? results.postgres.sender.rps / results.postgres.bare.rps : 0;
  const failed = Object.values(results).some(
    (r) => r.bare.non2xx + r.bare.errors + r.sender.non2xx + r.sender.errors,
  );
  if (failed) console.log('\nsome requests failed (see the failed column)');
  if (pgRatio >= TARGET)
    console.log(`\nPostgreSQL target met: sender ${pgRatio.toFixed(2)}x the bare route (target ${TARGET}x)`);
  else
    console.log(
      `\nbelow target:\nPostgreSQL: sender ${pgRatio.toFixed(2)}x the bare route's sessions/s (target ${TARGET}x)`,
    );
}

const [command, storage, where, scenario] = process.argv.slice(2);
if (command === 'serve') await serve(storage as Storage, where as string, (scenario ?? 'none') as Scenario);
else await main();
