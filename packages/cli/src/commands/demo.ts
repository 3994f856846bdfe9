import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReceiver, generateSigningSecret, type PayhookEvent, silentLogger } from '@payhook/core';
import { createTestEvent, createTestRequest } from '@payhook/core/testing';
import { type Command, EXIT, type Io, painter, parse, printJson } from '../command.js';

const METHODS = [
  { type: 'bank_account', currency: 'NGN', amount: 1_500_000, outcome: 'succeeded' },
  { type: 'card', currency: 'NGN', amount: 2_450_000, outcome: 'succeeded' },
  { type: 'etransfer', currency: 'CAD', amount: 120_000, outcome: 'succeeded' },
  { type: 'wallet', currency: 'USD', amount: 250_000, outcome: 'succeeded' },
  { type: 'crypto_address', currency: 'USD', amount: 100_000, outcome: 'failed' },
] as const;

const WAIT_MS = 60_000;

interface Page {
  data?: unknown;
  pagination?: { after: string; before: string };
}

interface SenderEvent {
  id: string;
  type: string;
  payment_id: string;
  delivery_status: string;
}

export const demo: Command = {
  name: 'demo',
  summary: 'Everything in one process: the sender delivers real payments to a verifying receiver',
  help: `Usage: payhook demo [--json]

Runs the whole flow in one process on embedded defaults (nothing to install or configure; it
ignores DATABASE_URL and REDIS_URL): the reference sender on a temporary PGlite directory, and
an Express receiver (memory store) registered as its webhook URL. It creates a customer and a
payment session for each payment method, captures them, completes four and fails one through
the sandbox, and shows each event as it is delivered, verified and handled. The receiver drops
the first delivery (503) to show a retry (when the retried event arrives after a later event of
its payment, per-payment order hands it to onStale instead of the handlers), and a forged event
is refused. Then a summary.

Exits 0 only if every event the sender lists in GET /events was delivered to the receiver,
verified and handled exactly once (checked against the sender's own record); 1 otherwise.

Options:
  --json       print only the summary, as JSON
  -h, --help   show this help

Example:
  payhook demo`,
  async run(argv, io) {
    const { values } = parse('demo', argv, { json: { type: 'boolean' } });
    return runDemo(io, Boolean(values.json));
  },
};

async function runDemo(io: Io, json: boolean): Promise<number> {
  const c = painter(io);
  const live = c.on && !json;
  const say = (line: string) => {
    if (json) return;
    io.stdout.write(live ? `\r\x1b[2K${line}\n` : `${line}\n`);
  };
  const businessId = randomUUID();
  const apiKey = `sk_test_demo_${randomUUID().replaceAll('-', '')}`;
  // Loaded here, not at start: the other commands start without them.
  const [{ payhook }, { loadConfig, openDatabase, startSender }, { default: express }] = await Promise.all([
    import('@payhook/express'),
    import('@payhook/sender'),
    import('express'),
  ]);
  const dir = await mkdtemp(join(tmpdir(), 'payhook-demo-'));
  const closers: (() => Promise<void>)[] = [() => rm(dir, { recursive: true, force: true })];
  try {
    // The sender, on its own temporary PGlite directory; no variable of the shell reaches it.
    const database = await openDatabase({ dataDir: join(dir, 'data') });
    closers.unshift(() => database.close());
    const sender = await startSender({
      config: loadConfig({
        PORT: '0',
        PAYHOOK_API_KEYS: `${apiKey}:${businessId}:test`,
        // The receiver listens on loopback: a development setting, never for production.
        PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      }),
      database,
      logger: false,
    });
    closers.unshift(() => sender.close());
    const request = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${sender.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const parsed = (await res.json()) as Page & { error?: { code: string; message: string } };
      if (res.status >= 300)
        throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(parsed.error)}`);
      return parsed;
    };
    const api = async (method: string, path: string, body?: unknown) =>
      (await request(method, path, body)).data as Record<string, unknown>;

    // The receiver: what a merchant runs, with the business id and the signing secret the sender
    // shows. Only authentic events reach the handlers: the checksum and the Standard Webhooks
    // signature must both verify. The demo prints what happens itself; the forged events it
    // sends are refused on purpose.
    const { data: secrets } = (await request('GET', '/accounts/signing-secrets')) as unknown as {
      data: { secret: string }[];
    };
    const signingSecret = secrets[0]?.secret as string;
    const receiver = createReceiver({
      businessIds: [businessId],
      allowedIps: ['127.0.0.1', '::1'],
      signingSecrets: [signingSecret],
      logger: silentLogger,
    });
    const handled = new Map<string, number>();
    const answers = new Map<number, number>();
    /** Sessions whose line is printed, and the handled events' lines waiting for it. */
    const announced = new Set<string>();
    const waiting = new Map<string, (() => void)[]>();
    /** Events that came after a later one of their payment (the retried `created`): `onStale`'s. */
    const stale = new Set<string>();
    const handle = (event: PayhookEvent, late: boolean) => {
      const data = event.data as {
        id?: string;
        payment_method?: { type?: string } | null;
        currency?: string;
      };
      const key = `${event.event} ${data.id}`;
      handled.set(key, (handled.get(key) ?? 0) + 1);
      if (late) stale.add(key);
      const outcome = late
        ? c.yellow('stale: it came after a later event of its payment, so onStale took it')
        : 'handled';
      const line = () =>
        say(
          `  ${c.green('✓')} ${event.event.padEnd(26)} ${(payments.get(data.id ?? '')?.type ?? '?').padEnd(15)} delivered ${c.dim('→')} verified ${c.dim('→')} ${outcome}`,
        );
      // An event can arrive before its session's line is printed (it is delivered as the session
      // is created): it waits for that line, so the story reads in order.
      const id = data.id ?? '';
      if (announced.has(id)) line();
      else waiting.set(id, [...(waiting.get(id) ?? []), line]);
    };
    // Per-payment order: an event older in its payment's lifecycle than one already handled (the
    // `created` retried after its payment's `succeeded`) goes to onStale, not to the handlers, so
    // the payment never moves back; it is still processed exactly once.
    receiver.onAny((event) => handle(event, false));
    receiver.onStale((event) => handle(event, true));
    let dropped = false;
    const app = express();
    app.use('/webhooks', (req, res, next) => {
      res.on('finish', () => answers.set(res.statusCode, (answers.get(res.statusCode) ?? 0) + 1));
      // A network hiccup: the first delivery gets 503, and the sender tries again on schedule.
      if (!dropped && req.headers['payhook-attempt'] === '1') {
        dropped = true;
        say(`  ${c.yellow('!')} receiver answers 503 to the first delivery: the sender retries in about 5 s`);
        res.status(503).json({ error: { code: 'demo_outage' } });
        return;
      }
      next();
    });
    app.use('/webhooks', payhook(receiver));
    const server: Server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.unshift(async () => {
      await receiver.close();
      server.closeAllConnections();
      server.close();
    });
    const receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/`;

    say(c.bold('payhook demo'));
    say(`  sender    ${sender.url} ${c.dim('(PGlite in a temporary directory)')}`);
    say(
      `  receiver  ${receiverUrl} ${c.dim('(Express, memory store, checksum + Standard Webhooks signature)')}`,
    );
    say(`  business  ${businessId}\n`);

    await api('PATCH', '/accounts/settings', { webhook_urls: [receiverUrl] });
    const customer = await api('POST', '/customers', {
      first_name: 'Adaeze',
      last_name: 'Okafor',
      email: 'adaeze@example.com',
      phone_number: '+2348031234567',
      billing_address: {
        line1: '12 Admiralty Way',
        line2: '',
        city: 'Lekki',
        state: 'Lagos',
        zip_code: '106104',
        country: 'NG',
      },
    });
    const payments = new Map<string, (typeof METHODS)[number]>();
    for (const [i, method] of METHODS.entries()) {
      const session = await api('POST', '/payment-sessions', {
        customer_id: customer.id,
        description: `Demo order ${i + 1}`,
        currency: method.currency,
        amount: method.amount,
        payment_method: { type: method.type },
        metadata: { order: { identifier: `DEMO-${i + 1}`, items: [{ name: 'Gift card', type: 'digital' }] } },
      });
      const id = (session.payment as { id: string }).id;
      payments.set(id, method);
      const capture =
        method.type === 'card'
          ? { card: { number: '4242424242424242', expiry_month: 12, expiry_year: 2030, cvv: '123' } }
          : {};
      const captured = await api('POST', `/payment-sessions/${id}`, capture);
      say(
        `  ${c.dim('·')} session ${id.slice(0, 8)} ${method.type.padEnd(15)} created and captured: ${captured.message}`,
      );
      announced.add(id);
      for (const line of waiting.get(id) ?? []) line();
      waiting.delete(id);
      await api('POST', `/sandbox/payment-sessions/${id}/complete`, { outcome: method.outcome });
    }
    for (const lines of waiting.values()) for (const line of lines) line();
    waiting.clear();
    say(`  ${c.dim('·')} four sessions paid and one failed through the sandbox; delivering...`);

    // Wait until the sender's own record shows every event delivered and the receiver handled each.
    const deadline = Date.now() + WAIT_MS;
    let events: SenderEvent[] = [];
    for (;;) {
      events = await listEvents(request);
      const done =
        events.length === METHODS.length * 2 &&
        events.every((e) => e.delivery_status === 'delivered' && handled.has(`${e.type} ${e.payment_id}`));
      if (done || Date.now() > deadline) break;
      if (live) {
        const count = events.filter((e) => e.delivery_status === 'delivered').length;
        io.stdout.write(`\r\x1b[2K  ${c.dim(`waiting: ${count}/${events.length} events delivered`)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // Forged events, from someone who knows the business id (it is no secret) but not the signing
    // secret: a valid checksum without a signature, and one signed with a made-up secret.
    const forged = createTestEvent('payment.session.succeeded', businessId, { method: 'card' });
    const forgeries = [
      { label: 'a forged event without a signature', secrets: [] as string[] },
      { label: 'a forged event signed with a guessed secret', secrets: [generateSigningSecret()] },
    ];
    const refusals: { status: number; code: string }[] = [];
    for (const forgery of forgeries) {
      const { body, headers } = createTestRequest(forged, { secrets: forgery.secrets });
      const res = await fetch(receiverUrl, { method: 'POST', headers, body });
      const code = ((await res.json()) as { error?: { code: string } }).error?.code ?? 'none';
      refusals.push({ status: res.status, code });
      say(
        `  ${res.status === 401 ? c.green('✓') : c.red('✗')} ${forgery.label} is refused: ${res.status} ${code}`,
      );
    }
    const refused = refusals.filter((r) => r.status === 401).length;

    // Let the receiver finish what it acknowledged, so a late duplicate would show.
    await receiver.close();

    const details = await Promise.all(
      events.map(
        async (e) => (await api('GET', `/events/${e.id}`)) as { deliveries: { attempt_count: number }[] },
      ),
    );
    const retried = details.filter((d) => d.deliveries.some((x) => x.attempt_count > 1)).length;
    const attempts = details.reduce((n, d) => n + d.deliveries.reduce((m, x) => m + x.attempt_count, 0), 0);
    const problems = events.flatMap((e) => {
      const n = handled.get(`${e.type} ${e.payment_id}`) ?? 0;
      if (e.delivery_status !== 'delivered')
        return [`${e.type} ${e.payment_id}: delivery ${e.delivery_status}`];
      return n === 1 ? [] : [`${e.type} ${e.payment_id}: handled ${n} times`];
    });
    const expected = new Set(events.map((e) => `${e.type} ${e.payment_id}`));
    for (const key of handled.keys()) if (!expected.has(key)) problems.push(`${key}: handled but not sent`);
    if (events.length !== METHODS.length * 2)
      problems.push(`${events.length} events sent, ${METHODS.length * 2} expected`);
    for (const r of refusals) {
      if (r.status !== 401) problems.push(`a forged event was answered ${r.status}, not 401`);
    }
    const summary = {
      ok: problems.length === 0,
      events: events.length,
      delivered: events.filter((e) => e.delivery_status === 'delivered').length,
      verified: answers.get(200) ?? 0,
      handled: [...handled.values()].reduce((a, b) => a + b, 0),
      stale: stale.size,
      retried,
      attempts,
      forgedRefused: refused === forgeries.length,
      problems,
    };
    if (json) {
      printJson(io, summary);
    } else {
      const rows: [string, string][] = [
        ['events sent (GET /events)', String(summary.events)],
        ['delivered', String(summary.delivered)],
        ['verified by the receiver', String(summary.verified)],
        [
          'handled exactly once',
          String(events.filter((e) => handled.get(`${e.type} ${e.payment_id}`) === 1).length),
        ],
        ['of them stale (onStale)', String(stale.size)],
        ['retried', `${summary.retried} (${summary.attempts} attempts in all)`],
        ['forged events refused', `${refused} of ${forgeries.length}`],
      ];
      say('');
      for (const [label, value] of rows) say(`  ${label.padEnd(28)} ${value}`);
      say('');
      if (summary.ok)
        say(c.green('Every event the sender recorded was delivered, verified and handled exactly once.'));
      else for (const p of problems) say(c.red(`  ✗ ${p}`));
    }
    return summary.ok ? EXIT.ok : EXIT.failed;
  } finally {
    for (const close of closers) await close().catch(() => {});
  }
}

/** Every event of the sender, following the pagination cursors. */
async function listEvents(request: (method: string, path: string) => Promise<Page>): Promise<SenderEvent[]> {
  const all: SenderEvent[] = [];
  let after = '';
  do {
    const page = await request(
      'GET',
      `/events?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`,
    );
    all.push(...(page.data as SenderEvent[]));
    after = page.pagination?.after ?? '';
  } while (after);
  return all;
}
