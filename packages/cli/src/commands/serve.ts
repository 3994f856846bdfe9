import { randomUUID } from 'node:crypto';
import { ConfigError, createApiKey, loadConfig, startSender } from '@payhook/sender';
import { CliError, type Command, EXIT, parse } from '../command.js';
import { openStorage, storageOptions } from '../storage.js';

export const serve: Command = {
  name: 'serve',
  summary: 'Run the reference sender (API, event delivery) on PGlite or PostgreSQL',
  help: `Usage: payhook serve [--port 8080] [--host 127.0.0.1] [--data-dir ./.payhook | --database-url <url>] [--allow-private-webhooks]

Runs the reference sender: the payment, customer, beneficiary and settings API, and the
delivery of events to every registered webhook URL with retries for 48 hours. Data lives in an
embedded PGlite directory, or on PostgreSQL (several instances then share the work). On the
first start with no API key it creates a test-mode key and prints it with its business id.
The environment variables of the sender (PORT, HOST, PAYHOOK_DATA_DIR, DATABASE_URL,
PAYHOOK_API_KEYS, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS, LOG_LEVEL, ...) apply; flags win over them.
Stops on Ctrl-C or SIGTERM, finishing or releasing the deliveries in flight.

Options:
  --port <n>                  port to listen on                              default: 8080
  --host <address>            address to listen on                           default: 127.0.0.1
  --data-dir <dir>            the PGlite directory                           default: ./.payhook
  --database-url <url>        a PostgreSQL server instead
  --allow-private-webhooks    let webhook URLs point at private and loopback addresses
                              (local development only)
  -h, --help                  show this help

Examples:
  payhook serve
  payhook serve --port 9000 --allow-private-webhooks
  payhook serve --database-url postgres://postgres@127.0.0.1:5432/payhook`,
  async run(argv, io) {
    const { values } = parse('serve', argv, {
      port: { type: 'string' },
      host: { type: 'string' },
      'allow-private-webhooks': { type: 'boolean' },
      ...storageOptions,
    });
    let config: ReturnType<typeof loadConfig>;
    try {
      config = loadConfig({
        ...io.env,
        ...(values.port !== undefined ? { PORT: values.port } : {}),
        ...(values.host !== undefined ? { HOST: values.host } : {}),
        ...(values['allow-private-webhooks'] ? { PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' } : {}),
      });
    } catch (error) {
      if (error instanceof ConfigError) throw new CliError(error.message.replace(/^PORT/, '--port (PORT)'));
      throw error;
    }
    const database = await openStorage(values, io.env);
    try {
      if (config.apiKeys.length === 0) {
        const stored = await database.db.selectFrom('api_keys').select('id').limit(1).execute();
        if (stored.length === 0) {
          const businessId = randomUUID();
          const key = await createApiKey(database.db, { businessId, mode: 'test' });
          io.stdout.write(
            `First start: created a test-mode API key (shown only now; more with \`payhook keys create\`).\n  API key:     ${key}\n  business id: ${businessId}\n\n`,
          );
        }
      }
      const sender = await startSender({ config, database });
      io.stdout.write(
        `payhook sender listening on ${sender.url} (${database.kind}${database.kind === 'pglite' ? ` in ${values['data-dir'] ?? config.dataDir}` : ''})\n  API docs: ${sender.url}/docs\n`,
      );
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      io.stdout.write('Shutting down: finishing the deliveries in flight...\n');
      await sender.close();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        throw new CliError(`Port ${config.port} is in use: choose another with --port.`, EXIT.error);
      }
      throw error;
    } finally {
      await database.close();
    }
    return EXIT.ok;
  },
};
