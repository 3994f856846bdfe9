import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Transaction } from 'kysely';
import { type Static, type TSchema, Type } from 'typebox';
import type { Database } from '../db/database.js';
import type { Schema } from '../db/schema.js';
import { signingKeyring } from '../signing/keyring.js';
import {
  DEFAULT_ROTATION_OVERLAP_SECONDS,
  listSigningSecrets,
  MAX_ROTATION_OVERLAP_SECONDS,
  rotateSigningSecret,
} from '../signing/secrets.js';
import { idempotentWrite } from './idempotency.js';

/** When a secret is valid (`SecretValidity`), as every secret view of the API shows it. */
export const SecretValidityFields = {
  current: Type.Boolean({ description: 'The one new receivers should be given.' }),
  created_at: Type.String({ format: 'date-time' }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When a previous one stops being signed with and accepted; null for the current one.',
  }),
};

/** A list of secrets as the API answers it, the current one first, under `title`. */
export const secretList = <T extends TSchema>(secret: T, title: string) =>
  Type.Object(
    { data: Type.Array(secret, { description: 'The current one first, then previous ones.' }) },
    { title },
  );

/** A business-wide signing secret as the API shows it. */
export const SigningSecret = Type.Object(
  {
    secret: Type.String({ pattern: '^whsec_', description: 'Give it to the receiver: `whsec_` + base64.' }),
    ...SecretValidityFields,
  },
  { title: 'SigningSecret' },
);

const SigningSecrets = secretList(SigningSecret, 'SigningSecrets');

/** The body of a rotation: `{overlap_seconds?}`, `{}`, null or none. */
export const RotateBody = Type.Union(
  [
    Type.Object(
      {
        overlap_seconds: Type.Optional(
          Type.Integer({
            minimum: 0,
            maximum: MAX_ROTATION_OVERLAP_SECONDS,
            description: `How long the previous secret is still signed with and accepted (default ${DEFAULT_ROTATION_OVERLAP_SECONDS}, 24 hours; 0 ends it now, for a secret that leaked).`,
          }),
        ),
      },
      { additionalProperties: false, title: 'SigningSecretRotation' },
    ),
    Type.Null(),
  ],
  { description: 'Optional.' },
);

/**
 * The handler of a rotation's POST: `rotate` (with the overlap asked, or the default) makes the
 * new secret and returns the secrets after, in one idempotent write whose answer is never cached;
 * then `rotated` tells the signing keyring, which forgets the secrets it held.
 */
export function rotation<Route extends { Body: Static<typeof RotateBody> | undefined }, T>(
  database: Database,
  rotate: (request: FastifyRequest<Route>, tx: Transaction<Schema>, overlapSeconds: number) => Promise<T>,
  rotated: (request: FastifyRequest<Route>) => void,
): (request: FastifyRequest<Route>, reply: FastifyReply) => Promise<T> {
  return async (request, reply) => {
    // The constraint's Body: TypeScript does not resolve a generic route's body type by itself.
    const body = request.body as Static<typeof RotateBody> | undefined;
    const overlap = body?.overlap_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS;
    reply.header('cache-control', 'no-store');
    const response = await idempotentWrite(database.db, request, reply, 200, (tx) =>
      rotate(request, tx, overlap),
    );
    rotated(request);
    return response;
  };
}

const DESCRIPTION =
  'Every delivery attempt carries Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) signed with each valid secret of the business in this mode. Secrets are shown only to their own business.';

/**
 * `GET /accounts/signing-secrets` and `POST /accounts/signing-secrets/rotate`: the Standard
 * Webhooks secrets of the key's business and mode (docs/decisions.md, "Signatures beside the
 * checksum").
 */
export const signingSecretRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  app.get(
    '/accounts/signing-secrets',
    {
      schema: {
        operationId: 'listSigningSecrets',
        summary: 'The signing secrets of this business (current first)',
        description: DESCRIPTION,
        response: { 200: SigningSecrets },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return { data: await listSigningSecrets(db, request.principal) };
    },
  );

  app.post<{ Body: Static<typeof RotateBody> | undefined }>(
    '/accounts/signing-secrets/rotate',
    {
      schema: {
        operationId: 'rotateSigningSecret',
        summary: 'Rotate the signing secret: a new one becomes current, the previous one overlaps',
        description: `${DESCRIPTION} During the overlap every attempt carries one signature per valid secret, space-separated, so receivers holding either secret accept it. At most 5 secrets are valid at once.`,
        body: RotateBody,
        response: { 200: SigningSecrets },
      },
    },
    rotation(
      database,
      async (request, tx, overlap) => {
        await rotateSigningSecret(tx, request.principal, overlap);
        return { data: await listSigningSecrets(tx, request.principal) };
      },
      (request) => signingKeyring(database).invalidate(request.principal),
    ),
  );
};
