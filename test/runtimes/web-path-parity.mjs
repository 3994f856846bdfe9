// The Web path's verdicts beside the default path's, on the runtime that runs this file (Bun,
// where the Web path hashes with Bun's native CryptoHasher): events and signed webhooks from a few
// bytes to 40 KB, intact, forged, and signed under other keys, with one to three keys tried. Uses
// the built package. Prints one line of JSON: { runtime, native, cases, mismatches: [...] }.
import {
  encodeSignedEvent,
  generateSigningSecret,
  parseSigningSecret,
  readSignatureHeaders,
  signWebhook,
  verifyChecksum,
  verifyChecksumAsync,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '../../packages/core/dist/index.js';
import { createTestPayment } from '../../packages/core/dist/testing.js';

const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
const secret = parseSigningSecret(generateSigningSecret());
const other = parseSigningSecret(generateSigningSecret());
const mismatches = [];
let cases = 0;

/** A payment whose JSON is about `bytes` long. */
function paymentOfSize(bytes) {
  const payment = createTestPayment({ method: 'card', status: 'settled' });
  const items = payment.metadata.order.items;
  const first = items[0];
  while (JSON.stringify(payment).length < bytes) items.push({ ...first, name: `item ${items.length} é` });
  return payment;
}

for (const size of [0, 300, 1024, 4096, 12 * 1024 - 100, 12 * 1024 + 100, 40_000]) {
  const body = encodeSignedEvent('payment.session.succeeded', paymentOfSize(size), BIZ);
  const forged = body.replace('"amount":', '"amount":1');
  const signedBy = (s) => readSignatureHeaders(signWebhook({ id: `evt_${size}`, body, secrets: [s] }));
  for (const text of [body, forged]) {
    for (const ids of [[BIZ], ['someone-else', BIZ], ['someone-else']]) {
      cases++;
      const web = await verifyChecksumAsync({ rawBody: text }, { businessIds: ids, crypto: 'web' });
      const auto = verifyChecksum({ rawBody: text }, { businessIds: ids });
      const a = web.ok ? web.businessId : web.error.code;
      const b = auto.ok ? auto.businessId : auto.error.code;
      if (a !== b) mismatches.push({ size, check: 'checksum', web: a, auto: b });
    }
    for (const [name, headers] of [
      ['ours', signedBy(secret)],
      ['theirs', signedBy(other)],
    ]) {
      for (const secrets of [[secret], [other, secret], [other]]) {
        cases++;
        const web = await verifyWebhookSignatureAsync(headers, text, { secrets, crypto: 'web' });
        const auto = verifyWebhookSignature(headers, text, { secrets });
        if (JSON.stringify(web) !== JSON.stringify(auto))
          mismatches.push({ size, check: `signature ${name}`, web, auto });
      }
    }
  }
}

console.log(
  JSON.stringify({
    runtime: globalThis.Bun ? 'bun' : globalThis.Deno ? 'deno' : 'node',
    native: typeof globalThis.Bun?.CryptoHasher === 'function',
    cases,
    mismatches,
  }),
);
