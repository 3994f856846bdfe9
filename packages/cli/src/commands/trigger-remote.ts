import { isKnownEventName, KNOWN_EVENTS, type KnownEventName } from '@payhook/core';
import { CliError, closest, EXIT, type Io, printJson } from '../command.js';
import { commandLine } from '../invocation.js';
import { type ApiCall, SenderApi, SenderRefusedError, SenderUnreachableError } from '../sender-api.js';
import { type SenderFlags, senderOf } from '../sender-flags.js';

/** What `payhook trigger --api-key` makes happen on a sender. */
export interface RemoteTrigger {
  event: KnownEventName;
  baseUrl: string;
  apiKey: string;
  method: string;
  json: boolean;
}

/** The flags `trigger` takes, as parsed: those of both modes. */
export interface TriggerFlags extends SenderFlags {
  to?: string;
  'business-id'?: string;
  secret?: string[];
  data?: string;
  'allow-unknown-event'?: boolean;
  method?: string;
  json?: boolean;
}

/** The flags of the other mode: a signed event sent straight to a receiver. */
export const RECEIVER_FLAGS = ['to', 'business-id', 'secret', 'data'] as const;

/** The sandbox's card that goes through 3-D Secure to success. */
const SANDBOX_CARD = {
  card: { number: '4242424242424242', expiry_month: 12, expiry_year: 2040, cvv: '123' },
};

/** Where to get a test key, said wherever one is missing or wrong. */
const getATestKey = (io: Io) =>
  `Use a test key (sk_test_...): \`${commandLine('serve', io.env)}\` prints one on its first start, \`${commandLine('keys create --business-id <id> --mode test', io.env)}\` makes another.`;

/**
 * `payhook trigger <event> --api-key <key> [--base-url <sender>]` (by default the sender `payhook
 * serve` runs): checks the flags of this mode (those of the receiver mode, `--to`,
 * `--business-id`, `--secret`, `--data` and `--allow-unknown-event`, are a usage error, as are an
 * event the sender does not make and a key that is not a test key), then makes the event on the
 * sender with {@link triggerOnSender}. Resolves to the exit code.
 */
export async function triggerRemote(event: string, values: TriggerFlags, io: Io): Promise<number> {
  const mixed = RECEIVER_FLAGS.filter((flag) => values[flag] !== undefined);
  if (mixed.length > 0) {
    throw new CliError(
      `--${mixed[0]} is for sending a signed event straight to a receiver (with --to, --business-id, --secret, --data); --base-url and --api-key make the event on a sender instead (with --method), which signs it itself. Use one mode or the other. See: ${commandLine('trigger --help', io.env)}`,
    );
  }
  if (values['allow-unknown-event'] !== undefined) {
    throw new CliError(
      `--allow-unknown-event is for sending a signed event straight to a receiver (--to): a sender only sends the events it makes (${KNOWN_EVENTS.join(', ')}), so on a sender no other name can be made.`,
    );
  }
  if (!isKnownEventName(event)) {
    const suggestion = closest(event, KNOWN_EVENTS);
    throw new CliError(
      `Unknown event ${JSON.stringify(event)}.${suggestion ? ` Did you mean ${suggestion}?` : ''} A sender makes ${KNOWN_EVENTS.join(', ')}, and only those.`,
    );
  }
  // The sender `payhook serve` runs by default, as for `endpoints` and `listen`.
  const { baseUrl, apiKey } = senderOf(values, io.env, ` with --base-url. ${getATestKey(io)}`);
  const method = values.method ?? 'bank_account';
  // The sender's sample session names the methods it can make; loaded here, not at every command.
  const { SAMPLE_CURRENCY } = await import('@payhook/sender');
  if (!Object.hasOwn(SAMPLE_CURRENCY, method)) {
    throw new CliError(
      `--method ${JSON.stringify(method)} cannot make a session on a sender: use ${Object.keys(SAMPLE_CURRENCY).join(', ')}.`,
    );
  }
  return triggerOnSender({ event, baseUrl, apiKey, method, json: values.json === true }, io);
}

type Envelope = { data?: { payment?: { id?: unknown; status?: unknown } } };

/** The payment of a session answer, or a refusal saying the answer is not the API's. */
function paymentOf(answer: Envelope, api: SenderApi): { id: string; status: string } {
  const payment = answer.data?.payment;
  if (typeof payment?.id !== 'string') {
    throw new SenderRefusedError(
      api.calls.at(-1) as ApiCall,
      undefined,
      'the answer carries no payment; is --base-url a payhook sender?',
    );
  }
  return { id: payment.id, status: String(payment.status) };
}

/**
 * Makes `event` happen on a running sender through its API, as a merchant's code and customer
 * would: creates a session (`payment.session.created`), and for the outcomes captures it and
 * completes it through the sandbox (`payment.session.succeeded` or `.failed`). Every POST carries
 * an Idempotency-Key (see {@link SenderApi}). Prints each call and the events the payment has
 * (`GET /events?payment_id=`), oldest first; resolves to the exit code: 0 done, 1 the sender
 * refused (its error code and message shown), 3 it could not be reached.
 */
export async function triggerOnSender(options: RemoteTrigger, io: Io): Promise<number> {
  // A live key is refused before any call: the session it would create first is a real one.
  if (!options.apiKey.startsWith('sk_test_')) {
    const live = options.apiKey.startsWith('sk_live_') ? 'This is a live key: ' : '';
    throw new CliError(
      `${live}trigger on a sender completes payments through the sandbox, which takes test keys only (sk_test_...); a live key would make a real payment session. ${getATestKey(io)}`,
    );
  }
  const api = new SenderApi({ baseUrl: options.baseUrl, apiKey: options.apiKey });
  const { sampleSession } = await import('@payhook/sender');
  const sample = sampleSession({ method: options.method, description: 'payhook trigger', source: 'trigger' });
  const say = (line: string) => {
    if (!options.json) io.stdout.write(`${line}\n`);
  };
  const done: string[] = [];
  try {
    const created = paymentOf(await api.post<Envelope>('/payment-sessions', sample), api);
    const paymentId = created.id;
    say(`Created payment session ${paymentId} (payment.session.created)`);
    done.push(`created payment session ${paymentId}`);
    if (options.event !== 'payment.session.created') {
      await api.post<Envelope>(
        `/payment-sessions/${paymentId}`,
        options.method === 'card' ? SANDBOX_CARD : undefined,
      );
      say(`Captured it (${options.method.replaceAll('_', ' ')})`);
      done.push('captured it');
      const outcome = options.event === 'payment.session.succeeded' ? 'succeeded' : 'failed';
      const completed = paymentOf(
        await api.post<Envelope>(`/sandbox/payment-sessions/${paymentId}/complete`, { outcome }),
        api,
      );
      say(`Completed it through the sandbox: ${completed.status} (${options.event})`);
    }
    const listed = await api.get<{ data?: { id: string; type: string }[] }>(
      `/events?payment_id=${encodeURIComponent(paymentId)}&limit=100`,
    );
    // The API lists newest first: shown in the order they were made.
    const events = (listed.data ?? []).map((e) => ({ id: e.id, type: e.type })).reverse();
    if (options.json) {
      printJson(io, { payment_id: paymentId, events, calls: api.calls });
    } else {
      for (const e of events) say(`  event ${e.type} ${e.id}`);
      say('The sender delivers these events to your registered webhook URLs and to every `payhook listen`.');
    }
    return EXIT.ok;
  } catch (error) {
    const already = done.length > 0 ? ` (Already done: ${done.join(', ')}.)` : '';
    if (error instanceof SenderUnreachableError) {
      const hint = done.length === 0 ? ` Is it running? \`${commandLine('serve', io.env)}\` starts one.` : '';
      throw new CliError(`${error.message}${hint}${already}`, EXIT.error);
    }
    if (error instanceof SenderRefusedError) {
      throw new CliError(`${error.message.replace(/\.$/, '')}.${hintFor(error, io)}${already}`, EXIT.failed);
    }
    throw error;
  }
}

/** What to do about a refusal, when the API's answer leaves it unsaid. */
function hintFor(error: SenderRefusedError, io: Io): string {
  if (error.call.status === 401)
    return ' Check --api-key (or PAYHOOK_API_KEY): the sender does not know this key.';
  if (error.call.status === 404 && error.call.path === '/payment-sessions') {
    return ' Is --base-url the address of a payhook sender (and its path, if any, the right one)?';
  }
  if (error.call.status === 404 && error.call.path.startsWith('/sandbox/')) {
    return ` The sandbox routes exist for test-mode keys only, and this sender holds this key as a live one: trigger needs a test-mode key. ${getATestKey(io)}`;
  }
  return '';
}
