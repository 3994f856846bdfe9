import { describe, expect, it } from 'vitest';
import type { AttemptOutcome } from '../src/delivery/attempt-outcome.js';
import {
  createRefusalHints,
  REFUSAL_HINT_INTERVAL_MS,
  receiverErrorCode,
  refusalHint,
} from '../src/delivery/refusal-hint.js';

const BIZ = 'biz_refusal_hint';
const ENDPOINT = '7d3c7c1e-0f5e-4d61-9d0e-3b8f0d2b9a11';

/** A receiver's answer: `status` with `{"error":{"code"}}` as a payhook receiver writes it. */
const refused = (status: number, code: string): AttemptOutcome => ({
  ok: false,
  statusCode: status,
  latencyMs: 3,
  responseBody: JSON.stringify({ error: { code, message: '...' } }),
  error: { code: 'unexpected_status', message: `HTTP ${status}` },
});

describe('refusalHint: what a 401 or 403 most likely means', () => {
  it('a v1 (HMAC) signature refused: the business signing secret', () => {
    for (const code of ['invalid_signature', 'signature_required']) {
      const hint = refusalHint(refused(401, code), BIZ, {
        signature: 'v1,abc= v1,def=',
        endpointId: ENDPOINT,
      });
      expect(hint).toBe(
        `signature refused (${code}): is the receiver using this business's current signing secret (GET /accounts/signing-secrets)?`,
      );
    }
    // Without what was sent, as before.
    expect(refusalHint(refused(401, 'invalid_signature'), BIZ)).toContain('current signing secret');
  });

  it("a v1a (Ed25519) signature refused: the endpoint's whpk_ public key and where to read it, not the business secret", () => {
    for (const code of ['invalid_signature', 'signature_required']) {
      const hint = refusalHint(refused(401, code), BIZ, {
        signature: 'v1a,sig1= v1a,sig2=',
        endpointId: ENDPOINT,
      });
      expect(hint).toBe(
        `signature refused (${code}): this endpoint signs with Ed25519 (v1a), not the business's secret: is the receiver's signingPublicKeys this endpoint's current whpk_ public key (GET /webhook-endpoints/${ENDPOINT}/signing-secrets; after a rotation, the new one)?`,
      );
      expect(hint).not.toContain('/accounts/signing-secrets');
    }
    expect(
      refusalHint(refused(401, 'invalid_signature'), BIZ, { signature: 'v1a,sig=', endpointId: null }),
    ).toContain('GET /webhook-endpoints/{id}/signing-secrets');
  });

  it('the other codes are the same whatever the scheme; other answers have no hint', () => {
    const v1a = { signature: 'v1a,sig=', endpointId: ENDPOINT };
    expect(refusalHint(refused(401, 'invalid_checksum'), BIZ, v1a)).toBe(
      `checksum refused: is the receiver using business id ${BIZ}?`,
    );
    expect(refusalHint(refused(403, 'ip_not_allowed'), BIZ, v1a)).toContain('allowedIps');
    expect(refusalHint(refused(401, 'signature_timestamp_out_of_tolerance'), BIZ, v1a)).toContain('clock');
    expect(refusalHint(refused(400, 'invalid_signature'), BIZ, v1a)).toBeUndefined();
    expect(refusalHint({ ...refused(401, 'x'), responseBody: 'Unauthorized' }, BIZ, v1a)).toBeUndefined();
  });

  it('says each hint of each URL once per interval', () => {
    let now = 0;
    const due = createRefusalHints(() => now);
    expect(due('http://a', 'h')).toBe(true);
    expect(due('http://a', 'h')).toBe(false);
    expect(due('http://b', 'h')).toBe(true);
    now += REFUSAL_HINT_INTERVAL_MS;
    expect(due('http://a', 'h')).toBe(true);
  });
});

describe('refusalHint: a receiver that cannot see the address', () => {
  it('500 client_address_unknown names getClientAddress and, with no proxy in front, allowAnyIp', () => {
    const hint = refusalHint(refused(500, 'client_address_unknown'), BIZ);
    expect(hint).toContain("the receiver cannot see this sender's address (client_address_unknown)");
    expect(hint).toContain('getClientAddress');
    expect(hint).toContain('allowAnyIp: true');
    // Any other 500 is the receiver's own fault: nothing to say.
    expect(refusalHint(refused(500, 'internal_error'), BIZ)).toBeUndefined();
  });
});

describe('receiverErrorCode', () => {
  it("reads a payhook receiver's error code, and nothing from any other body", () => {
    expect(receiverErrorCode('{"error":{"code":"signature_required","message":"..."}}')).toBe(
      'signature_required',
    );
    for (const body of [
      null,
      '',
      'Internal Server Error',
      '{"error":"nope"}',
      '{"error":{"code":"<b>x</b>"}}',
      'null',
    ])
      expect(receiverErrorCode(body)).toBeUndefined();
  });
});
