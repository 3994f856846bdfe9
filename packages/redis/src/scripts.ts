// The store's Lua scripts. Each runs atomically in one round trip and touches only keys that share
// one hash tag (the event's business), so they are cluster-safe: an event's record `E` and its
// tag's lease index `L` (a sorted set of event ids by lease expiry). Times come from the Redis
// server's clock, so instances whose clocks disagree still agree on leases.
import type { Cluster, Redis } from 'ioredis';

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: E, L. ARGV: owner, leaseMs, payload, businessId, retentionMs, member, touch.
 * A record under a live lease is a duplicate whoever asks, its own owner included (the reply names
 * the owner): two requests of one instance are two claims. With touch = 1 a duplicate stamps the
 * record (`seen`), a write that a following WAIT on this connection must see replicated.
 */
export const CLAIM = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease', 'attempts', 'received', 'owner')
local state = r[1]
local previous = 'new'
if state then
  local live = state == 'processing' and tonumber(r[2]) > now
  if (state == 'done' or live) and ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'seen', now) end
  if state == 'done' then return {'duplicate', 'done'} end
  if live then return {'duplicate', 'processing', r[5] or ''} end
  if state == 'failed' then previous = 'failed' else previous = 'expired' end
end
local attempts = (tonumber(r[3]) or 0) + 1
local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'processing', 'owner', ARGV[1], 'lease', lease, 'payload', ARGV[3],
  'biz', ARGV[4], 'attempts', attempts, 'received', r[4] or now, 'updated', now)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], lease, ARGV[6])
return {'claimed', previous, attempts}`;

const HELD = `local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
if r[1] ~= 'processing' or r[2] ~= ARGV[1] then return 0 end`;

/** KEYS: E, L. ARGV: owner, leaseMs, member. */
export const RENEW = `${HELD}
${NOW}
local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', lease)
redis.call('ZADD', KEYS[2], lease, ARGV[3])
return 1`;

// The done mark of COMPLETE and COMPLETE_ORDERED (after HELD and NOW).
const MARK_DONE = `redis.call('HSET', KEYS[1], 'state', 'done', 'updated', now)
redis.call('HDEL', KEYS[1], 'owner', 'lease', 'payload')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])`;

/** KEYS: E, L. ARGV: owner, retentionMs, member. Keeps a tombstone (no payload) for the retention. */
export const COMPLETE = `${HELD}
${NOW}
${MARK_DONE}
return 1`;

/**
 * Per-object order (docs/design.md, "Per-object order"). An object's record O (a hash in the
 * event's hash tag) holds `rank`, the highest completed, and `holder` and `held`, the member of
 * the event that took its lock and the event's `attempts` then. The lock is held while that claim
 * lasts: the holder's record `processing` under a live lease with the same attempts. It needs no
 * renewal of its own; a dead holder frees it when its lease lapses, and a new claim of the event
 * (a recovery, a redelivery after failure) does not inherit it.
 *
 * KEYS: E, O. ARGV: owner, record key prefix, member, retentionMs. Replies {'locked', rank or ''},
 * {'busy'} or {'lost'} (the owner does not hold E under a live lease).
 */
export const LOCK = `${NOW}
local e = redis.call('HMGET', KEYS[1], 'state', 'owner', 'lease', 'attempts')
if e[1] ~= 'processing' or e[2] ~= ARGV[1] or tonumber(e[3]) <= now then return {'lost'} end
local o = redis.call('HMGET', KEYS[2], 'holder', 'rank', 'held')
if o[1] and o[1] ~= ARGV[3] then
  local h = redis.call('HMGET', ARGV[2] .. o[1], 'state', 'lease', 'attempts')
  if h[1] == 'processing' and tonumber(h[2]) > now and h[3] == o[3] then return {'busy'} end
end
redis.call('HSET', KEYS[2], 'holder', ARGV[3], 'held', e[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'locked', o[2] or ''}`;

/**
 * COMPLETE, and in the same step the object's rank raised to ARGV[4] if higher ('' leaves it) and
 * its lock freed: no crash falls between the done mark and the rank.
 * KEYS: E, L, O. ARGV: owner, retentionMs, member, rank.
 */
export const COMPLETE_ORDERED = `${HELD}
${NOW}
${MARK_DONE}
local o = redis.call('HMGET', KEYS[3], 'holder', 'rank')
if ARGV[4] ~= '' and (not o[2] or tonumber(o[2]) < tonumber(ARGV[4])) then
  redis.call('HSET', KEYS[3], 'rank', ARGV[4])
end
if o[1] == ARGV[3] then redis.call('HDEL', KEYS[3], 'holder', 'held') end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
return 1`;

/** KEYS: E, L. ARGV: owner, retentionMs, member, error. Keeps payload and error for replay. */
export const FAIL = `${HELD}
${NOW}
redis.call('HSET', KEYS[1], 'state', 'failed', 'error', ARGV[4], 'updated', now)
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1`;

/**
 * KEYS: L. ARGV: owner, leaseMs, limit, record key prefix (the record of member m is prefix .. m).
 * Claims for `owner` the events whose lease lapsed; the records share L's hash tag.
 */
export const RECOVER = `${NOW}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
local lease = now + tonumber(ARGV[2])
for _, member in ipairs(due) do
  local key = ARGV[4] .. member
  local r = redis.call('HMGET', key, 'state', 'lease', 'attempts', 'payload', 'biz')
  if r[1] == 'processing' and tonumber(r[2]) <= now and r[4] then
    local attempts = (tonumber(r[3]) or 0) + 1
    redis.call('HSET', key, 'owner', ARGV[1], 'lease', lease, 'attempts', attempts, 'updated', now)
    redis.call('ZADD', KEYS[1], lease, member)
    table.insert(out, member)
    table.insert(out, r[4])
    table.insert(out, r[5] or '')
    table.insert(out, attempts)
  elseif r[1] ~= 'processing' then
    redis.call('ZREM', KEYS[1], member)
  end
end
return out`;

export type ClaimReply = [string, string, (number | string)?];

export type ScriptCommands = {
  payhookClaim(e: string, l: string, ...args: (string | number)[]): Promise<ClaimReply>;
  payhookRenew(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookComplete(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookFail(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookRecover(l: string, ...args: (string | number)[]): Promise<(string | number)[]>;
  payhookLock(e: string, o: string, ...args: (string | number)[]): Promise<string[]>;
  payhookCompleteOrdered(e: string, l: string, o: string, ...args: (string | number)[]): Promise<number>;
};

export const SCRIPTS: Record<keyof ScriptCommands, [number, string]> = {
  payhookClaim: [2, CLAIM],
  payhookRenew: [2, RENEW],
  payhookComplete: [2, COMPLETE],
  payhookFail: [2, FAIL],
  payhookRecover: [1, RECOVER],
  payhookLock: [2, LOCK],
  payhookCompleteOrdered: [3, COMPLETE_ORDERED],
};

/** Defines the store's scripts on a client (ioredis sends each by its SHA, loading it where missing). */
export function defineScripts(client: Redis | Cluster, names: (keyof ScriptCommands)[]): ScriptCommands {
  for (const name of names) {
    if (typeof (client as unknown as Record<string, unknown>)[name] === 'function') continue;
    const [numberOfKeys, lua] = SCRIPTS[name];
    client.defineCommand(name, { numberOfKeys, lua });
  }
  return client as unknown as ScriptCommands;
}
