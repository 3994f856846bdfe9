/*
 * The receiver's check of a payment (`data` of a known event), written out rather than compiled
 * from PaymentSchema by TypeBox: the compiler and its type system are most of what a receiver
 * bundled for a browser or a Worker would weigh (docs/decisions.md, "Verification without Node
 * built-ins"). It checks exactly what PaymentSchema says; test/validate-payment.test.ts holds the
 * two to the same verdicts on generated payments, so a change to one without the other fails there.
 */

/** One reason a value did not validate: a JSON pointer and a message. */
export interface ValidationIssue {
  path: string;
  message: string;
}

type Check = (value: unknown, path: string, issues: ValidationIssue[]) => boolean;

const fail = (issues: ValidationIssue[], path: string, message: string): false => {
  issues.push({ path, message });
  return false;
};

const string =
  (minLength = 0, maxLength = Number.POSITIVE_INFINITY): Check =>
  (value, path, issues) => {
    if (typeof value !== 'string') return fail(issues, path, 'must be string');
    if (minLength === 0 && maxLength === Number.POSITIVE_INFINITY) return true;
    // JSON Schema counts code points, not UTF-16 units.
    let length = 0;
    for (let k = 0; k < value.length; k++) {
      const c = value.charCodeAt(k);
      if (c < 0xdc00 || c > 0xdfff || k === 0 || (value.charCodeAt(k - 1) & 0xfc00) !== 0xd800) length++;
    }
    if (length < minLength) return fail(issues, path, `must not have fewer than ${minLength} characters`);
    if (length > maxLength) return fail(issues, path, `must not have more than ${maxLength} characters`);
    return true;
  };

/** An integer a JavaScript number holds exactly, at least `minimum`. */
const safeInteger =
  (minimum = -Number.MAX_SAFE_INTEGER): Check =>
  (value, path, issues) => {
    if (typeof value !== 'number' || !Number.isInteger(value)) return fail(issues, path, 'must be integer');
    if (value < minimum) return fail(issues, path, `must be greater or equal to ${minimum}`);
    if (value > Number.MAX_SAFE_INTEGER) {
      return fail(issues, path, `must be less or equal to ${Number.MAX_SAFE_INTEGER}`);
    }
    return true;
  };

const oneOf =
  (...values: readonly (string | null)[]): Check =>
  (value, path, issues) =>
    values.includes(value as string | null) ||
    fail(issues, path, `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}`);

const nullable =
  (check: Check): Check =>
  (value, path, issues) =>
    value === null || check(value, path, issues);

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** An object with these properties (extra ones allowed); names ending in `?` are optional. */
const object =
  (properties: Record<string, Check>): Check =>
  (value, path, issues) => {
    if (!isObject(value)) return fail(issues, path, 'must be object');
    let ok = true;
    for (const [spelled, check] of Object.entries(properties)) {
      const optional = spelled.endsWith('?');
      const name = optional ? spelled.slice(0, -1) : spelled;
      if (!Object.hasOwn(value, name)) {
        if (!optional) ok = fail(issues, path, `must have required property '${name}'`);
        continue;
      }
      if (!check(value[name], `${path}/${name}`, issues)) ok = false;
    }
    return ok;
  };

const array =
  (item: Check): Check =>
  (value, path, issues) => {
    if (!Array.isArray(value)) return fail(issues, path, 'must be array');
    let ok = true;
    for (let k = 0; k < value.length; k++) if (!item(value[k], `${path}/${k}`, issues)) ok = false;
    return ok;
  };

const address = object({
  line1: string(),
  line2: string(),
  city: string(),
  state: string(),
  zip_code: string(),
  country: string(2, 2),
});

const customer = object({
  id: string(),
  first_name: string(),
  last_name: string(),
  email: string(),
  phone_number: string(),
  billing_address: address,
  'business_id?': string(),
});

const metadata = object({
  order: object({ identifier: string(), items: array(object({ name: string(), type: string() })) }),
});

const methods: Record<string, Check> = {
  card: object({
    id: string(),
    type: string(),
    card_number: string(),
    expiry_month: safeInteger(),
    expiry_year: safeInteger(),
  }),
  bank_account: object({
    id: string(),
    type: string(),
    account_name: string(),
    account_number: string(),
    account_type: string(),
    bank_name: string(),
  }),
  crypto_address: object({ id: string(), type: string(), address: string(), network: string() }),
};

/**
 * A payment method: null, a known type in its shape, or another type (any fields). The schema's
 * union reads the same way, as `type` tells the branches apart.
 */
const paymentMethod: Check = (value, path, issues) => {
  if (value === null) return true;
  if (!isObject(value)) return fail(issues, path, 'must be object or null');
  if (typeof value.type !== 'string') return fail(issues, `${path}/type`, 'must be string');
  // The known types are KNOWN_PAYMENT_METHOD_TYPES (schemas.ts, not imported: it brings TypeBox).
  const known = Object.hasOwn(methods, value.type) ? methods[value.type] : undefined;
  return known === undefined || known(value, path, issues);
};

const payment = object({
  id: string(),
  reference: string(),
  correlation_id: string(),
  amount: safeInteger(0),
  currency: oneOf('NGN', 'USD', 'CAD'),
  description: string(),
  date: string(),
  status: oneOf('pending', 'captured', 'settled', 'failed'),
  cancellation_reason: nullable(string()),
  mode: oneOf('live', 'test'),
  customer,
  metadata,
  payment_method: paymentMethod,
});

/** The issues of `value` as a payment (PaymentSchema); none if it is one. */
export function paymentIssues(value: unknown, path = ''): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  payment(value, path, issues);
  return issues;
}
