import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import type { Principal } from '../auth/api-keys.js';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
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

/** `GET` and `PATCH /accounts/settings`: require_mfa and the webhook URLs events are delivered to. */
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
        data: { require_mfa: current?.require_mfa ?? false, webhook_urls: current?.webhook_urls ?? [] },
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
      const next = {
        require_mfa: body.require_mfa ?? current?.require_mfa ?? false,
        webhook_urls: urls ?? current?.webhook_urls ?? [],
      };
      await database.db
        .insertInto('account_settings')
        .values({
          business_id: businessId,
          mode,
          require_mfa: next.require_mfa,
          webhook_urls: JSON.stringify(next.webhook_urls),
        })
        .onConflict((oc) =>
          oc.columns(['business_id', 'mode']).doUpdateSet({
            require_mfa: next.require_mfa,
            webhook_urls: JSON.stringify(next.webhook_urls),
            updated_at: new Date(),
          }),
        )
        .execute();
      return { data: next };
    },
  );
};

/** A business's stored settings in one mode, if it has saved any. */
function readSettings(database: Database, { businessId, mode }: Principal) {
  return database.db
    .selectFrom('account_settings')
    .select(['require_mfa', 'webhook_urls'])
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .executeTakeFirst();
}
