import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Database, FedAttempt, SenderConfig } from '@payhook/sender';
import { CliError, type Command, EXIT, oneOf, painter, parse } from '../command.js';
import { commandLine } from '../invocation.js';
import { type LogFormat, logFormat, logStream, say } from '../log-format.js';
import { sayReceiverBlock } from '../receiver-block.js';
import { openStorage, storageOptions } from '../storage.js';
import {
  fitToServer,
  isServeProcess,
  processCount,
  reportListening,
  startServeProcesses,
  untilPrimaryStops,
} from './serve-processes.js';

export const serve: Command = {
  name: 'serve',
  summary: 'Run the reference sender (API, event delivery) on PGlite or PostgreSQL',
  help: `Usage: payhook serve [--port 8080] [--host 127.0.0.1] [--data-dir ./.payhook | --database-url <url>]
                     [--business-id <id>] [--allow-private-webhooks] [--log-format pretty|json]
                     [--processes <n>|auto]

Runs the reference sender: the payment, customer, beneficiary and settings API, and the
delivery of events to every registered webhook URL with retries for 48 hours. Data lives in an
embedded PGlite directory, or on PostgreSQL, where it runs one sender process per core on one port
(--processes) and any number of instances, on any machines, share the work.
On a start with no API key it creates a test-mode key (for --business-id, or a new business id)
and prints it: the only time it is shown. Every start prints the stored keys by prefix, the
command that makes another full key, the dashboard's address (/dashboard: sign in with an API
key), and ends with the receiver's settings to paste (BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS)
and the \`payhook endpoints add\` command that registers its URL; then one line per delivery
attempt (outcome, latency, event, URL). A port in use is reported before anything is created. The
environment variables of the sender (PORT, HOST, PAYHOOK_DATA_DIR, DATABASE_URL,
PAYHOOK_API_KEYS, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS, PAYHOOK_PROCESSES, LOG_LEVEL, ...) apply; flags win over them.
Signing secrets are stored sealed with PAYHOOK_SECRET_KEY (\`payhook keys secret-key\` makes one;
required on PostgreSQL); without it, on PGlite, with a key kept in <data dir>/payhook-secret-key
(made on the first start, mode 0600, and said so).
Stops on Ctrl-C or SIGTERM, finishing or releasing the deliveries in flight (a second
Ctrl-C stops at once; what was in flight is retried after its lease).

Options:
  --port <n>                  port to listen on                              default: 8080
  --host <address>            address to listen on                           default: 127.0.0.1
  --data-dir <dir>            the PGlite directory                           default: ./.payhook
  --database-url <url>        a PostgreSQL server instead
  --business-id <id>          the business of the test key made when it has none, so that the
                              sender and your receiver use one id (default: a new UUID)
  --allow-private-webhooks    let webhook URLs point at private and loopback addresses
                              (local development only)
  --log-format <format>       pretty (readable lines) or json (pino's JSON lines)
                                                 default: pretty in a terminal, json when piped
  --processes <n>|auto        sender processes sharing the port (PostgreSQL only; auto: one per
                              core, at most 8, half of them beside a local PostgreSQL, and as
                              many as its free connections fit) default: auto on PostgreSQL
  -h, --help                  show this help

Examples:
  payhook serve
  payhook serve --port 9000 --allow-private-webhooks --business-id "$BUSINESS_ID"
  payhook serve --database-url postgres://postgres@127.0.0.1:5432/payhook --log-format json`,
  async run(argv, io) {
    const { values } = parse('serve', argv, {
      port: { type: 'string' },
      host: { type: 'string' },
      'business-id': { type: 'string' },
      'allow-private-webhooks': { type: 'boolean' },
      'log-format': { type: 'string' },
      processes: { type: 'string' },
      ...storageOptions,
    });
    const format =
      values['log-format'] === undefined
        ? logFormat(undefined, io)
        : oneOf(values['log-format'], ['pretty', 'json'] as const, '--log-format', 'pretty');
    const businessId = values['business-id'];
    if (businessId !== undefined && !/^[\w.:-]{1,128}$/.test(businessId)) {
      throw new CliError('--business-id takes letters, digits, ".", ":", "_" and "-" (at most 128).');
    }
    // The sender's package is loaded here, not at start: the commands that run no sender start faster.
    const { ConfigError, loadConfig, SecretKeyError } = await import('@payhook/sender');
    let config: SenderConfig;
    try {
      config = loadConfig({
        ...io.env,
        ...(values.port !== undefined ? { PORT: values.port } : {}),
        ...(values.host !== undefined ? { HOST: values.host } : {}),
        ...(values['allow-private-webhooks'] ? { PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' } : {}),
      });
    } catch (error) {
      if (error instanceof ConfigError) throw new CliError(error.message.replace(/^PORT/, '--port (PORT)'));
      if (error instanceof SecretKeyError) throw new CliError(`${error.message} (${error.code})`);
      throw error;
    }
    // A process of `--processes` listens for its primary's stop from its first moment: a stop sent
    // while it starts is kept.
    const primaryStops = isServeProcess(io.env) ? untilPrimaryStops() : undefined;
    // Before the database and a key are made: a start that cannot listen leaves nothing behind (a
    // process of `--processes` shares the port its primary checked).
    const busy = primaryStops ? undefined : await listenProblem(config.host, config.port);
    if (busy) throw busy;
    const databaseUrl =
      values['database-url'] ||
      (values['data-dir'] === undefined ? io.env.DATABASE_URL || undefined : undefined);
    const asked = values.processes ?? io.env.PAYHOOK_PROCESSES;
    const wanted = processCount(asked, databaseUrl);
    const dataDir = values['data-dir'] ?? config.dataDir;
    const firstStart = databaseUrl === undefined && !existsSync(join(dataDir, 'PG_VERSION'));
    if (firstStart) {
      say(format, io, `Creating the sender's database in ${dataDir} (first start: a few seconds)...`, {
        dataDir,
      });
    }
    const database = await openStorage(values, io.env, {
      ...config.databaseTimeouts,
      poolSize: config.databasePoolSize,
    });
    const { processes, note } = await fitToServer(primaryStops ? undefined : database, wanted, asked, config);
    if (note) say(format, io, note.text, note.fields);
    if (primaryStops) {
      // One of the sender processes of `--processes`: the primary made the key and prints the rest.
      try {
        const one = await startOne(config, database, format, io);
        reportListening(one.url);
        await Promise.race([primaryStops, untilStopped(format, io).stopped]);
        await one.stop();
      } finally {
        await database.close();
      }
      return EXIT.ok;
    }
    // Listened for from here: a stop that comes while the start finishes (its last lines printed,
    // and a supervisor already sending SIGTERM) is a graceful stop, not the signal's default.
    const stop = untilStopped(format, io);
    try {
      if (firstStart) say(format, io, 'Database ready.');
      const madeKey = await ensureKey(database, config.apiKeys, businessId, format, io);
      const running =
        processes > 1
          ? await startServeProcesses(processes, argv, format, io)
          : await startOne(config, database, format, io);
      const where =
        database.kind === 'pglite'
          ? `pglite in ${dataDir}`
          : `${database.kind}, ${processes} process${processes > 1 ? 'es' : ''}`;
      say(format, io, `payhook sender listening on ${running.url} (${where})`, {
        url: running.url,
        processes,
      });
      say(format, io, `  Dashboard: ${running.url}/dashboard (sign in with an API key)`, {
        dashboard: `${running.url}/dashboard`,
      });
      say(format, io, `  API docs:  ${running.url}/docs`, { docs: `${running.url}/docs` });
      const pglite = database.kind === 'pglite' ? { dataDir } : undefined;
      const business = await printKeys(database, config.apiKeys, businessId, pglite, format, io);
      if (business) {
        const { listSigningSecrets } = await import('@payhook/sender');
        const [secret] = await listSigningSecrets(database.db, business);
        sayReceiverBlock(format, io, {
          businessId: business.businessId,
          webhookSecret: secret?.secret,
          senderUrl: running.url,
          apiKey: madeKey,
          apiKeyInEnv: Boolean(io.env.PAYHOOK_API_KEY),
          allowPrivateWebhooks: config.allowPrivateWebhooks,
        });
      }
      await stop.stopped;
      say(format, io, 'Shutting down: finishing the deliveries in flight...');
      await running.stop();
    } catch (error) {
      // The start failed: a stop while the storage closes is the signal's default again.
      stop.dispose();
      // Taken between the check and the sender's own listen.
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw portInUse(config.host, config.port);
      throw error;
    } finally {
      await database.close();
    }
    return EXIT.ok;
  },
};

/**
 * Starts the sender in this process, printing one line per delivery attempt as its worker records
 * it; `stop` finishes (or releases) the deliveries in flight.
 */
async function startOne(
  config: SenderConfig,
  database: Database,
  format: LogFormat,
  io: Parameters<Command['run']>[1],
): Promise<{ url: string; stop(): Promise<void> }> {
  const { startSender } = await import('@payhook/sender');
  const sender = await startSender({
    config,
    database,
    logger: { level: config.logLevel, stream: logStream(format, io) },
  });
  const stopLines = sender.feed.subscribe((attempts) => {
    for (const attempt of attempts) sayAttempt(format, io, attempt);
  });
  return {
    url: sender.url,
    async stop() {
      await sender.close();
      stopLines();
    },
  };
}

/**
 * Why the sender could not listen on `host`:`port`, found by listening there a moment first
 * (nothing for port 0, which the system picks): a one-line error naming the port and `--port`.
 */
function listenProblem(host: string, port: number): Promise<CliError | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const where = `${host}:${port}`;
      if (error.code === 'EADDRINUSE') resolve(portInUse(host, port));
      else if (error.code === 'EACCES') {
        resolve(
          new CliError(
            `Port ${port} needs privileges to listen on: choose one from 1024 up with --port.`,
            EXIT.error,
          ),
        );
      } else resolve(new CliError(`Cannot listen on ${where}: ${error.message}.`, EXIT.error));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** A port something else listens on: it may be any program, so the message does not guess which. */
const portInUse = (host: string, port: number) =>
  new CliError(
    `Port ${port} is in use on ${host} (by another program, or another payhook serve): choose another with --port.`,
    EXIT.error,
  );

/**
 * Resolves on the first SIGINT (Ctrl-C) or SIGTERM, so that the caller shuts down gracefully. A
 * second one while it does stops the process at once (130 or 143, as a shell reports a signal):
 * the deliveries in flight are then sent again once their lease runs out. `dispose` gives the
 * signals back their default (a start that failed: nothing is left to stop gracefully).
 */
function untilStopped(
  format: LogFormat,
  io: Parameters<Command['run']>[1],
): { stopped: Promise<void>; dispose(): void } {
  let onSignal: (signal: NodeJS.Signals) => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    let stopping = false;
    onSignal = (signal) => {
      if (!stopping) {
        stopping = true;
        resolve();
        return;
      }
      say(format, io, `${signal} again: stopping now; deliveries in flight are retried after their lease.`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  return {
    stopped,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Makes a test-mode key when the sender has none (for `--business-id`, or a new business), or
 * when `--business-id` names a business without a stored key; prints it, the only time it is shown.
 */
async function ensureKey(
  database: Database,
  configured: readonly { businessId: string }[],
  asked: string | undefined,
  format: LogFormat,
  io: Parameters<Command['run']>[1],
): Promise<string | undefined> {
  let query = database.db.selectFrom('api_keys').select('id').where('mode', '=', 'test').limit(1);
  if (asked !== undefined) query = query.where('business_id', '=', asked);
  const stored = await query.execute();
  const fromConfig = configured.some((k) => asked === undefined || k.businessId === asked);
  if (stored.length > 0 || fromConfig) return undefined;
  const businessId = asked ?? randomUUID();
  const { createApiKey } = await import('@payhook/sender');
  const key = await createApiKey(database.db, { businessId, mode: 'test' });
  say(format, io, 'Created a test-mode API key (shown only now: keep it).', { apiKey: key, businessId });
  if (format === 'pretty') say(format, io, `  API key:     ${key}\n  business id: ${businessId}\n`);
  return key;
}

/**
 * The keys the sender takes, by prefix, and how to get another full key (on PGlite, with the
 * sender stopped: one process at a time). Resolves to the business a receiver verifies with, in
 * the mode of its key (test when it has one).
 */
async function printKeys(
  database: Database,
  configured: readonly { businessId: string; mode: string }[],
  asked: string | undefined,
  pglite: { dataDir: string } | undefined,
  format: LogFormat,
  io: Parameters<Command['run']>[1],
): Promise<{ businessId: string; mode: 'test' | 'live' } | undefined> {
  const rows = await database.db
    .selectFrom('api_keys')
    .select(['key_prefix', 'business_id', 'mode'])
    .orderBy('created_at')
    .limit(6)
    .execute();
  const listAll = commandLine('keys list', io.env);
  const keys = [
    ...rows.slice(0, 5).map((r) => ({
      text: `${r.key_prefix}… (${r.mode}, business ${r.business_id})`,
      fields: { keyPrefix: r.key_prefix, mode: r.mode, businessId: r.business_id },
    })),
    ...(rows.length > 5 ? [{ text: `... (${listAll} shows them all)`, fields: undefined }] : []),
    ...configured.map((k) => ({
      text: `from PAYHOOK_API_KEYS (${k.mode}, business ${k.businessId})`,
      fields: { mode: k.mode, businessId: k.businessId },
    })),
  ];
  const business = asked ?? rows[0]?.business_id ?? configured[0]?.businessId;
  const create = commandLine(
    `keys create --business-id ${business ?? '<id>'} --mode test ${
      pglite
        ? `--data-dir ${/\s/.test(pglite.dataDir) ? JSON.stringify(pglite.dataDir) : pglite.dataDir}`
        : '--database-url <url>'
    }`,
    io.env,
  );
  const hint = `a key is shown in full only when made; for another, ${pglite ? 'stop this sender and ' : ''}run`;
  if (format === 'json') {
    for (const key of keys) {
      if (key.fields) say(format, io, `API key ${key.text}`, key.fields);
      else say(format, io, `More API keys: ${listAll} shows them all.`);
    }
    say(format, io, `A${hint.slice(1)}: ${create}`, { command: create });
  } else {
    for (const [i, key] of keys.entries())
      say(format, io, `  ${i === 0 ? 'API keys: ' : '          '} ${key.text}`);
    say(format, io, `             ${hint}\n             ${create}`);
  }
  if (business === undefined) return undefined;
  const modes = [...rows.map((r) => ({ businessId: r.business_id, mode: r.mode })), ...configured].filter(
    (k) => k.businessId === business,
  );
  return {
    businessId: business,
    mode: modes.some((k) => k.mode === 'test') || modes.length === 0 ? 'test' : 'live',
  };
}

/**
 * A delivery attempt as a line: `09:28:13  ✓ 200  6 ms  payment.session.created  <url>  [event id]`
 * for a person (a refusal also names the receiver's error code and what to check), a pino line
 * (`msg: "delivery attempt"` and its fields) for a machine.
 */
function sayAttempt(format: LogFormat, io: Parameters<Command['run']>[1], a: FedAttempt): void {
  const fields = {
    event: a.eventType,
    event_id: a.eventId,
    url: a.url,
    attempt: a.attempt,
    status_code: a.statusCode,
    latency_ms: a.latencyMs,
    error_code: a.errorCode,
    receiver_code: a.receiverCode ?? null,
    hint: a.hint ?? null,
    delivery_status: a.status,
  };
  if (format === 'json') {
    say(format, io, 'delivery attempt', fields);
    return;
  }
  const paint = painter(io);
  const ok = a.statusCode === 200 && a.errorCode === null;
  // A refusal names the receiver's error code (`✗ 500 client_address_unknown`) and what to check.
  const status = a.receiverCode ? `${a.statusCode} ${a.receiverCode}` : String(a.statusCode);
  const outcome = a.statusCode === null ? (a.errorCode ?? 'no response') : status;
  const next = a.status === 'pending' ? '  (will retry)' : a.status === 'failed' ? '  (failed for good)' : '';
  const time = a.startedAt.toTimeString().slice(0, 8);
  say(
    format,
    io,
    `${paint.dim(time)}  ${ok ? paint.green(`✓ ${outcome}`) : paint.red(`✗ ${outcome}`)}  ${a.latencyMs} ms  ${a.eventType}  ${a.url}  [${a.eventId}]${next}${a.hint ? `  ${paint.yellow(a.hint)}` : ''}`,
  );
}
