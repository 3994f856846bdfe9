import type { LookupAddress, LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { classifyAddress } from '../net/public-address.js';
import type { Resolver } from '../net/webhook-url.js';

/** Raised inside the connect-time lookup; carries the outcome code through undici unchanged. */
export class RefusedLookupError extends Error {
  constructor(
    readonly refusal: 'non_public_address' | 'unresolvable_host',
    message: string,
  ) {
    super(message);
    this.name = 'RefusedLookupError';
  }
}

/**
 * Builds the `lookup` hook of the sockets: resolve with the injected resolver, refuse unless every
 * address is public, and hand the socket exactly the addresses that were vetted. Node calls it for
 * host names only (IP literals skip it; the attempt-time URL check covers those), and it runs again
 * for every new connection, so a name that now resolves somewhere private is caught even though the
 * attempt-time check passed a moment ago (DNS rebinding).
 */
export function createVettedLookup(resolve: Resolver, allowPrivate: boolean): LookupFunction {
  const vet = async (hostname: string): Promise<string[]> => {
    let addresses: string[];
    try {
      addresses = [...(await resolve(hostname))];
    } catch (cause) {
      throw new RefusedLookupError(
        'unresolvable_host',
        `${hostname} could not be resolved (${(cause as Error).message}).`,
      );
    }
    if (addresses.length === 0)
      throw new RefusedLookupError('unresolvable_host', `${hostname} has no address.`);
    // An address that is not an IP at all (a broken resolver) is refused even with allowPrivate:
    // the socket could not connect to it anyway.
    const refused = addresses
      .map((address) => ({ address, class: classifyAddress(address) }))
      .filter((c) => c.class === 'invalid' || (!allowPrivate && c.class !== 'public'));
    if (refused.length > 0) {
      throw new RefusedLookupError(
        'non_public_address',
        `${hostname} resolves to a non-public address at connect time (${refused.map((c) => `${c.address}: ${c.class}`).join(', ')}); webhook URLs must be publicly reachable.`,
      );
    }
    return addresses;
  };

  return (hostname, options: LookupOptions, callback) => {
    vet(hostname).then(
      (vetted) => {
        const entries: LookupAddress[] = vetted
          .map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
          .filter((entry) => !options.family || entry.family === options.family);
        const first = entries[0];
        if (!first) {
          const error = new RefusedLookupError(
            'unresolvable_host',
            `${hostname} has no IPv${options.family} address.`,
          );
          callback(error, '', 0);
        } else if (options.all) {
          // Node asks for every address when autoSelectFamily (happy eyeballs, the default since
          // Node 20) is on, and for one address otherwise.
          callback(null, entries);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: Error) => callback(error, '', 0),
    );
  };
}
