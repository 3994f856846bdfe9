import type { Static } from 'typebox';
import type { WebhookEndpoint } from './webhook-endpoints.js';

/**
 * A webhook endpoint as `GET /webhook-endpoints` and `GET /webhook-endpoints/{id}` answer it (the
 * API's own schema): what a client of the API, the CLI's `payhook endpoints` for one, reads.
 */
export type WebhookEndpointView = Static<typeof WebhookEndpoint>;
