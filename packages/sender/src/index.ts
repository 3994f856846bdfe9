export type { AddressClass } from './net/public-address.js';
export { classifyAddress, isPublicAddress } from './net/public-address.js';
export type { CheckWebhookUrlOptions, Resolver, WebhookUrlCheck } from './net/webhook-url.js';
export { checkWebhookUrl, systemResolver } from './net/webhook-url.js';
