// A merchant's integration test against the payhook sandbox, with nothing but fetch: create a
// customer and a payment session, capture it, complete it the way the customer would, and check
// the events the sender recorded. Start the sender first (`payhook serve`), then:
//
//   PAYHOOK_URL=http://127.0.0.1:8080 PAYHOOK_API_KEY=sk_test_... node index.mjs
//
// Exits 0 when the payment settled and both of its events were recorded; 1 otherwise.

const base = (process.env.PAYHOOK_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const key = process.env.PAYHOOK_API_KEY;
if (!key) {
  console.error('Set PAYHOOK_API_KEY to a test-mode key (payhook serve prints one on its first start).');
  process.exit(2);
}

async function call(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  console.log(`${method} ${path} -> ${res.status}`);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.error)}`);
  return json.data;
}

const customer = await call('POST', '/customers', {
  first_name: 'Chinedu',
  last_name: 'Eze',
  email: 'chinedu@example.com',
  phone_number: '+2348021234567',
  billing_address: {
    line1: '5 Broad St',
    line2: '',
    city: 'Lagos',
    state: 'Lagos',
    zip_code: '101001',
    country: 'NG',
  },
});
const session = await call('POST', '/payment-sessions', {
  customer_id: customer.id,
  description: 'Integration test order',
  currency: 'NGN',
  amount: 250000,
  payment_method: { type: 'bank_account' },
  metadata: { order: { identifier: `IT-${Date.now()}`, items: [{ name: 'Headphones', type: 'physical' }] } },
});
const id = session.payment.id;
const captured = await call('POST', `/payment-sessions/${id}`);
console.log(
  `  pay into: ${captured.payment.payment_method.bank_name} ${captured.payment.payment_method.account_number}`,
);
await call('POST', `/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' });
const payment = await call('GET', `/payments/${id}`);
console.log(`  payment ${id}: ${payment.status}`);
const res = await fetch(`${base}/events?payment_id=${id}`, { headers: { authorization: `Bearer ${key}` } });
const events = (await res.json()).data.map((e) => e.type).sort();
console.log(`  events: ${events.join(', ')}`);
const ok =
  payment.status === 'settled' &&
  JSON.stringify(events) === JSON.stringify(['payment.session.created', 'payment.session.succeeded']);
console.log(ok ? 'ok' : 'unexpected result');
process.exit(ok ? 0 : 1);
