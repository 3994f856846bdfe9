// payhook's idempotency store over a Durable Object: one object holds the events' records in its
// storage, and every operation runs inside it, one at a time (a Durable Object handles one event
// at a time while it waits on its own storage), so a claim is atomic across every isolate and
// every colocation of the Worker. This is what exactly-once needs on Workers: a Worker's memory
// is one isolate's, and isolates come and go.
import { DurableObject } from 'cloudflare:workers';

const DAY = 24 * 60 * 60 * 1000;
const PREFIX = 'event:';

/**
 * The Durable Object class: export it from the Worker's entry and bind it (wrangler.toml,
 * `durable_objects.bindings`). Its methods are called over RPC by {@link durableObjectStore}.
 */
export class PayhookStore extends DurableObject {
  /** The record of `key`, or undefined once a finished one is past the retention. */
  async #live(key, retentionMs, now) {
    const record = await this.ctx.storage.get(PREFIX + key);
    if (record && record.state !== 'processing' && record.updatedAt + retentionMs <= now) {
      await this.ctx.storage.delete(PREFIX + key);
      return undefined;
    }
    return record;
  }

  async #held(key, owner, retentionMs) {
    const record = await this.#live(key, retentionMs, Date.now());
    return record?.state === 'processing' && record.owner === owner ? record : undefined;
  }

  /** Finished records are swept after the retention: the alarm runs when the oldest may lapse. */
  async #finish(record, retentionMs) {
    await this.ctx.storage.put(PREFIX + record.key, record);
    await this.ctx.storage.put('retentionMs', retentionMs);
    if ((await this.ctx.storage.getAlarm()) === null)
      await this.ctx.storage.setAlarm(Date.now() + retentionMs);
  }

  async claim(key, request, retentionMs) {
    const now = Date.now();
    const record = await this.#live(key, retentionMs, now);
    let previous = 'new';
    if (record) {
      if (record.state === 'done') return { status: 'duplicate', state: 'done' };
      // A live lease is never granted twice, not even to its own owner.
      if (record.state === 'processing' && (record.leaseUntil ?? 0) > now) {
        return { status: 'duplicate', state: 'processing', owner: record.owner ?? '' };
      }
      previous = record.state === 'failed' ? 'failed' : 'expired';
    }
    const attempts = (record?.attempts ?? 0) + 1;
    await this.ctx.storage.put(PREFIX + key, {
      key,
      state: 'processing',
      owner: request.owner,
      leaseUntil: now + request.leaseMs,
      payload: request.payload,
      businessId: request.businessId,
      attempts,
      error: record?.error,
      receivedAt: record?.receivedAt ?? now,
      updatedAt: now,
    });
    return { status: 'claimed', attempts, previous };
  }

  async renew(key, owner, leaseMs, retentionMs) {
    const record = await this.#held(key, owner, retentionMs);
    if (!record) return false;
    record.leaseUntil = Date.now() + leaseMs;
    await this.ctx.storage.put(PREFIX + key, record);
    return true;
  }

  async complete(key, owner, retentionMs) {
    const record = await this.#held(key, owner, retentionMs);
    if (!record) return false;
    // A tombstone: the payload is not needed to refuse duplicates.
    Object.assign(record, { state: 'done', owner: undefined, leaseUntil: undefined, payload: undefined });
    record.updatedAt = Date.now();
    await this.#finish(record, retentionMs);
    return true;
  }

  async fail(key, owner, error, retentionMs) {
    const record = await this.#held(key, owner, retentionMs);
    if (!record) return false;
    Object.assign(record, { state: 'failed', owner: undefined, leaseUntil: undefined, error });
    record.updatedAt = Date.now();
    await this.#finish(record, retentionMs);
    return true;
  }

  async recover(owner, leaseMs, limit) {
    const now = Date.now();
    const out = [];
    for (const record of (await this.ctx.storage.list({ prefix: PREFIX })).values()) {
      if (out.length >= limit) break;
      if (record.state !== 'processing' || (record.leaseUntil ?? 0) > now || record.payload === undefined)
        continue;
      record.owner = owner;
      record.leaseUntil = now + leaseMs;
      record.attempts += 1;
      record.updatedAt = now;
      await this.ctx.storage.put(PREFIX + record.key, record);
      out.push({
        key: record.key,
        payload: record.payload,
        businessId: record.businessId,
        attempts: record.attempts,
      });
    }
    return out;
  }

  async get(key, retentionMs) {
    const record = await this.#live(key, retentionMs, Date.now());
    return record ? { ...record } : undefined;
  }

  async alarm() {
    const retentionMs = (await this.ctx.storage.get('retentionMs')) ?? 7 * DAY;
    const now = Date.now();
    let next;
    for (const [name, record] of await this.ctx.storage.list({ prefix: PREFIX })) {
      if (record.state === 'processing') continue;
      const lapses = record.updatedAt + retentionMs;
      if (lapses <= now) await this.ctx.storage.delete(name);
      else next = Math.min(next ?? lapses, lapses);
    }
    if (next !== undefined) await this.ctx.storage.setAlarm(next);
  }
}

/**
 * An idempotency store (`IdempotencyStore` of @payhook/core) over the PayhookStore Durable Object
 * bound as `namespace`. Every receiver that names the same object (`name`, default "payhook")
 * shares its records: exactly once across isolates and locations. Finished records are kept for
 * `retentionMs` (default 7 days).
 */
export function durableObjectStore(namespace, { name = 'payhook', retentionMs = 7 * DAY, leaseMs } = {}) {
  const id = namespace.idFromName(name);
  // A stub per call: each call belongs to the request (or waitUntil) that makes it.
  const object = () => namespace.get(id);
  return {
    leaseMs,
    claim: (key, request) => object().claim(key, request, retentionMs),
    renew: (key, owner, lease) => object().renew(key, owner, lease, retentionMs),
    complete: (key, owner) => object().complete(key, owner, retentionMs),
    fail: (key, owner, error) => object().fail(key, owner, error, retentionMs),
    recover: (owner, lease, limit) => object().recover(owner, lease, limit),
    get: (key) => object().get(key, retentionMs),
  };
}
