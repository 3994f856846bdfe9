import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Database } from '../db/database.js';
import { DatabaseTimeoutError } from '../db/health.js';

/** How long the health check waits for the database before calling it failed. */
export const HEALTH_CHECK_TIMEOUT_MS = 2000;

const CHECKS = {
  type: 'object',
  required: ['database'],
  properties: {
    database: { type: 'string', description: '`ok`, or `failed: <reason>`' },
  },
} as const;
const HEALTH = {
  type: 'object',
  required: ['ok', 'storage', 'checks'],
  properties: {
    ok: { type: 'boolean' },
    storage: { type: 'string', enum: ['pglite', 'postgres'] },
    checks: CHECKS,
  },
} as const;

/** Runs one trivial query, within {@link HEALTH_CHECK_TIMEOUT_MS}: `ok`, or why it failed. */
async function checkDatabase(database: Database): Promise<string> {
  // Known to be away: said at once, with what failed (the checks under way say when it is back).
  if (database.health.state === 'down') return `failed: unavailable (${database.health.reason})`;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      sql`select 1`.execute(database.db),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new DatabaseTimeoutError(`no answer within ${HEALTH_CHECK_TIMEOUT_MS} ms`)),
          HEALTH_CHECK_TIMEOUT_MS,
        );
      }),
    ]);
    return 'ok';
  } catch (error) {
    database.health.report(error);
    return `failed: ${(error as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `GET /healthz`, without an API key: 200 `{ ok: true, storage, checks: { database: 'ok' } }` when
 * the database answers a query, else 503 with `ok: false` and what failed, for a load balancer or
 * an orchestrator's probe.
 */
export async function healthRoutes(app: FastifyInstance, options: { database: Database }): Promise<void> {
  const { database } = options;
  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Health of the API and its database',
        description:
          'Needs no API key. 200 when the database answers a query; 503 with the failed part otherwise.',
        tags: ['operations'],
        operationId: 'getHealth',
        security: [],
        response: { 200: HEALTH, 503: HEALTH },
      },
    },
    async (_request, reply) => {
      const checks = { database: await checkDatabase(database) };
      const ok = checks.database === 'ok';
      return reply.code(ok ? 200 : 503).send({ ok, storage: database.kind, checks });
    },
  );
}
