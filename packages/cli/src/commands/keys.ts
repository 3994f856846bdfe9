import { CliError, type Command, closest, EXIT, oneOf, parse, printJson, required } from '../command.js';
import { commandLine } from '../invocation.js';
import { openStorage, storageOptions } from '../storage.js';

export const keys: Command = {
  name: 'keys',
  summary: 'Create, list and revoke API keys of the sender (stored hashed); make a sealing key',
  help: `Usage: payhook keys create --business-id <id> --mode test|live [--data-dir <dir> | --database-url <url>] [--json]
       payhook keys list [--business-id <id>] [--data-dir <dir> | --database-url <url>] [--json]
       payhook keys revoke <key or prefix> [--data-dir <dir> | --database-url <url>] [--json]
       payhook keys secret-key [--id <key id>] [--json]

create stores a new API key for one business in one mode and prints it once: only its hash is
kept. list shows the keys' prefixes, businesses, modes and creation times. revoke deletes a
stored key, given whole or by the prefix list shows (a prefix that several keys share revokes
none and lists them); the sender refuses it from the next request. Storage: the PGlite
directory (default ./.payhook, or PAYHOOK_DATA_DIR) or a PostgreSQL server (DATABASE_URL).
A PGlite directory is used by one process at a time: stop \`payhook serve\` first.
secret-key prints a new key for PAYHOOK_SECRET_KEY, the key that seals the signing secrets in the
sender's database (<key id>:<32 random bytes, base64url>); it opens no storage. To rotate it, see
the sender's README ("Signing secrets at rest").

Options:
  --business-id <id>     the business the key acts for                   required by create
  --mode <mode>          test or live                                    required by create
  --id <key id>          the id of a new secret-key (letters, digits, _ and -)
                                                                         default: k + 8 random hex digits
  --data-dir <dir>       the sender's PGlite directory                   default: ./.payhook
  --database-url <url>   a PostgreSQL server instead
  --json                 print JSON
  -h, --help             show this help

Examples:
  payhook keys create --business-id biz_123 --mode test
  payhook keys list --json
  payhook keys revoke sk_test_AbCd
  payhook keys secret-key --id k2026
  payhook keys create --business-id biz_123 --mode live --database-url postgres://localhost/payhook`,
  async run(argv, io) {
    const [action, ...rest] = argv;
    const actions = ['create', 'list', 'revoke', 'secret-key'];
    if (action === undefined || !actions.includes(action)) {
      const suggestion = action && closest(action, actions);
      throw new CliError(
        `payhook keys takes create, list, revoke or secret-key${action ? `, not ${JSON.stringify(action)}` : ''}.${suggestion ? ` Did you mean ${suggestion}?` : ''} See: ${commandLine('keys --help', io.env)}`,
      );
    }
    const { values, positionals } = parse(
      'keys',
      rest,
      {
        'business-id': { type: 'string' },
        mode: { type: 'string' },
        id: { type: 'string' },
        json: { type: 'boolean' },
        ...storageOptions,
      },
      action === 'revoke' ? 1 : 0,
    );
    if (action === 'secret-key') {
      const { generateSecretKey, SecretKeyError } = await import('@payhook/sender');
      let key: string;
      try {
        key = generateSecretKey(values.id);
      } catch (error) {
        if (error instanceof SecretKeyError) throw new CliError(`--id: ${error.message}`);
        throw error;
      }
      if (values.json) printJson(io, { secretKey: key, id: key.slice(0, key.indexOf(':')) });
      else
        io.stdout.write(
          `PAYHOOK_SECRET_KEY=${key}\n\nThe key that seals the sender's signing secrets: keep it outside the database (a secret manager), the same on every instance.\n`,
        );
      return EXIT.ok;
    }
    if (action === 'revoke') {
      const target = required(positionals[0], '<key or prefix>', 'keys');
      const database = await openStorage(values, io.env);
      const { revokeApiKey } = await import('@payhook/sender');
      try {
        let result: Awaited<ReturnType<typeof revokeApiKey>>;
        try {
          result = await revokeApiKey(database.db, target);
        } catch (error) {
          throw new CliError((error as Error).message);
        }
        const { revoked, matches } = result;
        if (values.json) printJson(io, { revoked: revoked ?? null, matches });
        else if (revoked) {
          io.stdout.write(`Revoked ${revoked.prefix}… (${revoked.mode}, business ${revoked.businessId}).\n`);
        } else if (matches.length === 0) {
          io.stderr.write(
            `No stored key matches ${JSON.stringify(target.slice(0, 12))}. See: ${commandLine('keys list', io.env)}\n`,
          );
        } else {
          io.stderr.write(
            `${matches.length} keys start with ${JSON.stringify(target)}; none revoked. Give the whole key:\n${matches
              .map((m) => `  ${m.prefix}…  ${m.mode}  ${m.businessId}  ${m.createdAt.toISOString()}`)
              .join('\n')}\n`,
          );
        }
        return revoked ? EXIT.ok : EXIT.failed;
      } finally {
        await database.close();
      }
    }
    if (action === 'create') {
      const businessId = required(values['business-id'], '--business-id', 'keys');
      const mode = oneOf(
        required(values.mode, '--mode', 'keys'),
        ['test', 'live'] as const,
        '--mode',
        'test',
      );
      const database = await openStorage(values, io.env);
      const { createApiKey } = await import('@payhook/sender');
      try {
        const key = await createApiKey(database.db, { businessId, mode });
        if (values.json) printJson(io, { key, businessId, mode });
        else
          io.stdout.write(
            `${key}\n\nAPI key for business ${businessId} (${mode} mode). It is shown only now: keep it.\n`,
          );
      } finally {
        await database.close();
      }
      return EXIT.ok;
    }
    const database = await openStorage(values, io.env);
    try {
      let query = database.db
        .selectFrom('api_keys')
        .select(['key_prefix', 'business_id', 'mode', 'created_at'])
        .orderBy('created_at');
      if (values['business-id']) query = query.where('business_id', '=', values['business-id']);
      const rows = await query.execute();
      const list = rows.map((r) => ({
        prefix: r.key_prefix,
        businessId: r.business_id,
        mode: r.mode,
        createdAt: new Date(r.created_at).toISOString(),
      }));
      if (values.json) printJson(io, list);
      else if (list.length === 0)
        io.stdout.write('No stored keys (keys from PAYHOOK_API_KEYS are not stored).\n');
      else
        for (const k of list) io.stdout.write(`${k.prefix}…  ${k.mode}  ${k.businessId}  ${k.createdAt}\n`);
    } finally {
      await database.close();
    }
    return EXIT.ok;
  },
};
