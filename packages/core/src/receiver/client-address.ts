import { PayhookError } from '../errors.js';
import { type IpAllowList, normalizeIp, resolveClientIp } from '../ip.js';
import type { Logger } from './logger.js';
import type { ReceiverRequest } from './types.js';

/**
 * The client address of a request: with `trustedProxies`, the first address from the right of
 * X-Forwarded-For that is not a trusted proxy; otherwise the framework's own client address, or
 * the socket's, as it is (the allow-list reads every form of an address).
 */
export function clientAddress(
  request: ReceiverRequest,
  trustedProxies: IpAllowList | undefined,
): string | undefined {
  return trustedProxies
    ? resolveClientIp({
        remoteAddress: request.remoteAddress,
        forwardedFor: request.forwardedFor,
        trustedProxies,
      })
    : (request.clientIp ?? request.remoteAddress)?.trim();
}

/**
 * Why the allow-list refuses `clientIp`, logged; undefined if it passes. An unknown address is
 * `client_address_unknown` (500): the adapter was not told where the platform gives the address,
 * which is the receiver's setup to fix, not the sender's fault; one outside the list is
 * `ip_not_allowed` (403).
 */
export function addressRefusal(
  allowList: IpAllowList,
  clientIp: string | undefined,
  logger: Logger,
): PayhookError | undefined {
  if (!clientIp) {
    logger.warn(
      { code: 'client_address_unknown' },
      'payhook: request refused, its client address is unknown and allowedIps needs one (500 client_address_unknown): tell the adapter where the platform gives it (@payhook/web: getClientAddress, such as the x-real-ip header your proxy writes; trustCloudflare on Workers), or, with no proxy in front (next dev, next start locally), set allowAnyIp: true and let signingSecrets prove the sender',
    );
    return new PayhookError(
      'client_address_unknown',
      'The client address of this request is unknown, so the allow-list cannot be checked. Tell the adapter where the platform gives it (@payhook/web: the getClientAddress option, or trustCloudflare behind Cloudflare), or set allowAnyIp if signatures and checksums are enough.',
    );
  }
  if (allowList.contains(clientIp)) return undefined;
  const ip = normalizeIp(clientIp);
  logger.warn(
    { ip, code: 'ip_not_allowed' },
    `payhook: request from ${ip}, an address outside allowedIps, refused (403 ip_not_allowed): if the sender sends from it, add it (or its range) to allowedIps`,
  );
  return new PayhookError('ip_not_allowed', `Requests from ${ip} are not accepted.`);
}
