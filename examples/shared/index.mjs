// What the receiver examples share: configuration from the environment, a console logger.
import { createRedisStore } from '@payhook/redis';
export function receiverOptions(env = process.env) {
  const businessId = env.BUSINESS_ID;
  if (!businessId) {
    console.error('Set BUSINESS_ID to the id of the business that receives the events.');
    process.exit(2);
  }
  const allowed = (env.ALLOWED_IPS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (allowed.length === 0) {
    console.error(
      'Set ALLOWED_IPS to the addresses events come from (comma-separated), or "*" to allow any (local testing only).',
    );
    process.exit(2);
  }
  const ips = allowed.includes('*') ? { allowAnyIp: true } : { allowedIps: allowed };
  // WEBHOOK_SECRET (optional): the signing secret, whsec_... (several, comma-separated, during a
  // rotation); every request must then carry a valid signature, unless ALLOW_UNSIGNED=1 takes
  // unsigned ones on their checksum while some sender does not sign yet (a warning at start).
  const secrets = (env.WEBHOOK_SECRET ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // REDIS_URL (optional) shares idempotency between instances; without it, the memory store.
  const store = env.REDIS_URL
    ? createRedisStore({ redis: env.REDIS_URL, prefix: env.PAYHOOK_PREFIX ?? 'payhook' })
    : undefined;
  return {
    businessIds: [businessId],
    ...ips,
    ...(secrets.length > 0 ? { signingSecrets: secrets } : {}),
    ...(env.ALLOW_UNSIGNED === '1' ? { allowUnsigned: true } : {}),
    logger: consoleLogger,
    ...(store ? { store } : {}),
  };
}

const write = (level) => (obj, msg) =>
  console.log(JSON.stringify({ level, time: new Date().toISOString(), msg, ...obj }));
export const consoleLogger = { debug() {}, info: write('info'), warn: write('warn'), error: write('error') };

export const port = (env = process.env) => Number(env.PORT ?? 3000);

/** Logs what the receiver hands over; a real server would update its orders here. */
export function logEvents(receiver, framework) {
  receiver.onAny((event, { key, attempt }) => {
    const payment = event.data ?? {};
    console.log(
      `[${framework}] ${event.event} payment=${payment.id} status=${payment.status} amount=${payment.amount} ${payment.currency} (key ${key.slice(-12)}, attempt ${attempt})`,
    );
  });
  receiver.onUnrecognized(({ event, reason }) =>
    console.log(`[${framework}] unrecognized ${event.event}: ${reason}`),
  );
  receiver.onDeadLetter(({ key, error }) => console.log(`[${framework}] dead-lettered ${key}: ${error}`));
}
