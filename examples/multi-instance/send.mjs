// Sends signed events to several receivers the way the service does: each event to one instance
// (round robin), some twice, some to two instances at the same moment, and every delivery that
// is not answered 200 again, until it is. Usage: node send.mjs [count] [port ...]
import { createTestEvent } from '@payhook/core/testing';

/** Delivers one body until an instance answers 200; `onAnswer` sees every status (0: no connection). */
export async function deliver(url, body, { tries = 400, pauseMs = 50, onAnswer } = {}) {
  for (let attempt = 1; attempt <= tries; attempt++) {
    let status = 0;
    try {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      status = res.status;
      const answer = await res.json();
      await onAnswer?.(status, body);
      if (status === 200) return { attempts: attempt, body: answer };
    } catch {
      // connection refused or reset: a failed attempt, as for the service
      await onAnswer?.(status, body);
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  throw new Error(`no 200 after ${tries} attempts`);
}

/** Streams `count` events to `urls` with `parallel` deliveries at once; returns the checksums sent. */
export async function stream({ urls, businessId, count, parallel = 20, onProgress, onAnswer }) {
  const checksums = [];
  let next = 0;
  let delivered = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const event = createTestEvent('payment.session.succeeded', businessId, { reference: `ref_${i}` });
      checksums.push(event.checksum);
      const body = JSON.stringify(event);
      const a = urls[i % urls.length];
      const b = urls[(i + 1) % urls.length];
      const options = { onAnswer };
      if (i % 10 === 0)
        await Promise.all([deliver(a, body, options), deliver(b, body, options)]); // 10%: two instances at once
      else await deliver(a, body, options);
      if (i % 10 === 5) await deliver(b, body, options); // another 10%: sent again later (a retry)
      delivered++;
      onProgress?.(delivered);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return checksums;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [count = '100', ...ports] = process.argv.slice(2);
  const urls = (ports.length ? ports : ['3001', '3002', '3003']).map((p) => `http://127.0.0.1:${p}/webhooks`);
  const businessId = process.env.BUSINESS_ID ?? 'c5a1f3e2-8b7d-4c6e-9f0a-1b2c3d4e5f60';
  const started = Date.now();
  const sent = await stream({ urls, businessId, count: Number(count) });
  console.log(`${sent.length} events delivered to ${urls.length} instances in ${Date.now() - started} ms`);
}
