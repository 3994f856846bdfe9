// @module-tag postgres
import { verifyWebhookSignature } from '@payhook/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { listSigningSecrets } from '../src/index.js';
import { KEYRING_TTL_MS, signingKeyring } from '../src/signing/keyring.js';
import { openTestDatabase } from './fixtures/storage.js';

// The keyring reads a business's secrets every few seconds, in the background while attempts go
// on signing with the secrets read before. When that read fails (the database away), the process
// must go on: an unobserved rejection there once ended the sender in the middle of an outage.

describe('the signing keyring when its database goes away', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('signs with the secrets read before, and no refresh failure goes unobserved', async () => {
    const { database, cleanup } = await openTestDatabase('postgres', 'keyring');
    const principal = { businessId: 'biz-keyring', mode: 'test' as const };
    const unobserved: unknown[] = [];
    const onUnhandled = (reason: unknown) => unobserved.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const [secret] = await listSigningSecrets(database.db, principal);
      const keyring = signingKeyring(database);
      const body = '{"event":"payment.session.created"}';
      const first = await keyring.sign(principal, 'evt_1', body);
      expect(
        verifyWebhookSignature(
          {
            id: first['webhook-id'],
            timestamp: first['webhook-timestamp'],
            signature: first['webhook-signature'],
          },
          body,
          { secrets: [secret?.secret as string] },
        ).ok,
      ).toBe(true);

      // The database goes away, and the cached secrets come due for a refresh.
      await database.close();
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + KEYRING_TTL_MS + 1000 });
      for (const id of ['evt_2', 'evt_3']) {
        const headers = await keyring.sign(principal, id, body);
        const verdict = verifyWebhookSignature(
          {
            id: headers['webhook-id'],
            timestamp: headers['webhook-timestamp'],
            signature: headers['webhook-signature'],
          },
          body,
          { secrets: [secret?.secret as string], now: Date.now() },
        );
        expect(verdict.ok).toBe(true);
        // Let the failed refresh settle before the next attempt.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(unobserved).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      vi.useRealTimers();
      await cleanup().catch(() => {});
    }
  });
});
