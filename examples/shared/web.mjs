// What the Web-standard examples share (Bun, Deno, Workers, Hono, Next.js): the receiver's
// settings from a plain record of strings (process.env, Deno.env.toObject(), a Worker's env) and
// a console log of what it hands over. No Node built-in and no store client: it runs everywhere.

/** Receiver options from `env`; throws an Error naming the missing setting. */
export function webReceiverOptions(env) {
  const businessId = env.BUSINESS_ID;
  if (!businessId) throw new Error('Set BUSINESS_ID to the id of the business that receives the events.');
  const allowed = list(env.ALLOWED_IPS);
  if (allowed.length === 0) {
    throw new Error(
      'Set ALLOWED_IPS to the addresses events come from (comma-separated), or "*" to allow any (local testing only).',
    );
  }
  // WEBHOOK_SECRET (optional): the signing secret, whsec_... (several, comma-separated, during a
  // rotation); WEBHOOK_PUBLIC_KEY (optional): the Ed25519 public key of v1a signatures, whpk_...
  // (several likewise). With either, unsigned requests are refused (401 signature_required);
  // ALLOW_UNSIGNED=1 takes them on their checksum while some sender does not sign yet (a warning at
  // start).
  const secrets = list(env.WEBHOOK_SECRET);
  const publicKeys = list(env.WEBHOOK_PUBLIC_KEY);
  return {
    businessIds: [businessId],
    ...(allowed.includes('*') ? { allowAnyIp: true } : { allowedIps: allowed }),
    ...(secrets.length > 0 ? { signingSecrets: secrets } : {}),
    ...(publicKeys.length > 0 ? { signingPublicKeys: publicKeys } : {}),
    ...(env.ALLOW_UNSIGNED === '1' ? { allowUnsigned: true } : {}),
    logger: consoleLogger,
  };
}

const list = (value) =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const write = (level) => (obj, msg) =>
  console.log(JSON.stringify({ level, time: new Date().toISOString(), msg, ...obj }));
export const consoleLogger = { debug() {}, info: write('info'), warn: write('warn'), error: write('error') };

/** Logs what the receiver hands over; a real server would update its orders here. */
export function logEvents(receiver, runtime) {
  receiver.onAny((event, { key, attempt }) => {
    const payment = event.data ?? {};
    console.log(
      `[${runtime}] ${event.event} payment=${payment.id} status=${payment.status} amount=${payment.amount} ${payment.currency} (key ${key.slice(-12)}, attempt ${attempt})`,
    );
  });
  receiver.onUnrecognized(({ event, reason }) =>
    console.log(`[${runtime}] unrecognized ${event.event}: ${reason}`),
  );
  receiver.onDeadLetter(({ key, error }) => console.log(`[${runtime}] dead-lettered ${key}: ${error}`));
}
