import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import type { Database } from '../db/database.js';
import { rotateSecret } from '../endpoints/lifecycle.js';
import { getEndpoint } from '../endpoints/store.js';
import { ApiError } from '../errors.js';
import { listEndpointSecrets } from '../signing/endpoint-secrets.js';
import { signingKeyring } from '../signing/keyring.js';
import { listSigningSecrets } from '../signing/secrets.js';
import { RotateBody, rotation, SecretValidityFields, secretList } from './signing-secrets.js';

/** An endpoint's secret (v1) or public key (v1a) as the API shows it. */
export const EndpointSecret = Type.Object(
  {
    secret: Type.Optional(
      Type.String({ pattern: '^whsec_', description: 'v1: give it to the receiver (`whsec_` + base64).' }),
    ),
    public_key: Type.Optional(
      Type.String({
        pattern: '^whpk_',
        description:
          'v1a: the Ed25519 public key to give the receiver; the secret key never leaves the sender.',
      }),
    ),
    ...SecretValidityFields,
  },
  { title: 'WebhookEndpointSecret' },
);

const EndpointSecrets = secretList(EndpointSecret, 'WebhookEndpointSecrets');

const IdParams = Type.Object({ id: Type.String() });

const DESCRIPTION =
  "A v1 endpoint is signed with HMAC-SHA256 under its whsec_ secrets (webhook-signature: v1,...), a v1a endpoint with Ed25519 under its secret keys (v1a,...), whose whpk_ public keys are shown here. An endpoint made through the settings webhook_urls is signed with the business secrets, shown here as GET /accounts/signing-secrets shows them. Shown only to the endpoint's business.";

/**
 * `GET /webhook-endpoints/{id}/signing-secrets` and `POST .../signing-secrets/rotate`: an
 * endpoint's own secrets, rotated with the overlap rules of the business-wide ones.
 */
export const endpointSecretRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  app.get<{ Params: Static<typeof IdParams> }>(
    '/webhook-endpoints/:id/signing-secrets',
    {
      schema: {
        operationId: 'listWebhookEndpointSecrets',
        summary: "The endpoint's signing secrets or public keys (current first)",
        description: DESCRIPTION,
        params: IdParams,
        response: { 200: EndpointSecrets },
      },
    },
    async (request, reply) => {
      const endpoint = await getEndpoint(db, request.principal, request.params.id);
      reply.header('cache-control', 'no-store');
      if (endpoint.account_secrets) return { data: await listSigningSecrets(db, request.principal) };
      return { data: await listEndpointSecrets(db, endpoint.id, endpoint.signature_scheme) };
    },
  );

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof RotateBody> | undefined }>(
    '/webhook-endpoints/:id/signing-secrets/rotate',
    {
      schema: {
        operationId: 'rotateWebhookEndpointSecret',
        summary: "Rotate the endpoint's secret: a new one becomes current, the previous one overlaps",
        description: `${DESCRIPTION} During the overlap every attempt carries one signature per valid secret. At most 5 are valid at once. An endpoint signed with the business secrets is rotated with POST /accounts/signing-secrets/rotate (409 invalid_state here).`,
        params: IdParams,
        body: RotateBody,
        response: { 200: EndpointSecrets },
      },
    },
    rotation(
      database,
      async (request, tx, overlap) => {
        const endpoint = await getEndpoint(tx, request.principal, request.params.id);
        if (endpoint.account_secrets) {
          throw new ApiError(
            'invalid_state',
            'This endpoint is signed with the business secrets: rotate them with POST /accounts/signing-secrets/rotate.',
          );
        }
        await rotateSecret(tx, endpoint, overlap);
        return { data: await listEndpointSecrets(tx, endpoint.id, endpoint.signature_scheme) };
      },
      (request) => signingKeyring(database).invalidateEndpoint(request.params.id),
    ),
  );
};
