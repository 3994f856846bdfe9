import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import type { Principal } from '../auth/api-keys.js';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { replaceEndpointUrls } from '../endpoints/lifecycle.js';
import { endpointUrls } from '../endpoints/store.js';
import { ApiError } from '../errors.js';
import { checkWebhookUrl, type Resolver } from '../net/webhook-url.js';

const SettingsBody = Type.Object(
  {
    require_mfa: Type.Optional(Type.Boolean()),
    webhook_urls: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: 20 })),
  },
  { additionalProperties: true, title: 'AccountSettingsUpdate' },
);

const Settings = Type.Object(
  { require_mfa: Type.Boolean(), webhook_urls: Type.Array(Type.String()) },
  { title: 'AccountSettings' },
);

/**
 * `GET` and `PATCH /accounts/settings`: require_mfa and the webhook URLs events are delivered to.
 * The URLs are those of the business's webhook endpoints (`endpoints/lifecycle.ts`): a given
 * `webhook_urls` makes the endpoints' URLs that list, adding endpoints that take every event.
 */
export const settingsRoutes: FastifyPluginAsync<{
  database: Database;
  config: SenderConfig;
  resolve?: Resolver | undefined;
}> = async (app, { database, config, resolve }) => {
  app.get(
    '/accounts/settings',
    {
      schema: {
        summary: 'Read the account settings (webhook URLs, MFA)',
        operationId: 'getSettings',
        response: { 200: Type.Object({ data: Settings }) },
      },
    },
    async (request) => {
      const current = await readSettings(database, request.principal);
      return {
        data: {
          require_mfa: current?.require_mfa ?? false,
          webhook_urls: await endpointUrls(database.db, request.principal),
        },
      };
    },
  );

  app.patch<{ Body: Static<typeof SettingsBody> }>(
    '/accounts/settings',
    {
      schema: {
        summary: 'Update the account settings (webhook URLs, MFA)',
        operationId: 'updateSettings',
        body: SettingsBody,
        response: { 200: Type.Object({ data: Settings }) },
      },
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const body = request.body;
      const urls = body.webhook_urls;
      if (urls !== undefined) {
        const checks = await Promise.all(
          urls.map((url) =>
            checkWebhookUrl(url, {
              allowPrivate: config.allowPrivateWebhooks,
              ...(resolve ? { resolve } : {}),
            }),
          ),
        );
        // A host that does not resolve now is accepted: DNS may be down, and every delivery checks again.
        const refused = checks.flatMap((check, i) =>
          !check.ok && check.code !== 'unresolvable_host'
            ? [{ field: `webhook_urls.${i}`, message: check.message }]
            : [],
        );
        if (refused.length > 0)
          throw new ApiError('validation_failed', 'Some webhook URLs cannot receive events.', {
            details: refused,
          });
      }
      const current = await readSettings(database, request.principal);
      const requireMfa = body.require_mfa ?? current?.require_mfa ?? false;
      // The settings row and the endpoints change together; the endpoints are the list of URLs.
      const webhookUrls = await database.db.transaction().execute(async (tx) => {
        await tx
          .insertInto('account_settings')
          .values({ business_id: businessId, mode, require_mfa: requireMfa })
          .onConflict((oc) =>
            oc
              .columns(['business_id', 'mode'])
              .doUpdateSet({ require_mfa: requireMfa, updated_at: new Date() }),
          )
          .execute();
        return urls === undefined
          ? endpointUrls(tx, request.principal)
          : replaceEndpointUrls(tx, request.principal, urls);
      });
      const next = { require_mfa: requireMfa, webhook_urls: webhookUrls };
      return { data: next };
    },
  );
};

/** A business's stored settings in one mode, if it has saved any. */
function readSettings(database: Database, { businessId, mode }: Principal) {
  return database.db
    .selectFrom('account_settings')
    .select(['require_mfa'])
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .executeTakeFirst();
}
